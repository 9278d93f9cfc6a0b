"""The error texts of decode bundles that a user can cause, in one place: the Python loader formats them
here and torch-webgpu.js copies them verbatim (same placeholders), so both runtimes say the same thing.

Placeholders: {bundle} is the bundle's file name; the others are named for what they hold.
"""

from __future__ import annotations

# generate(): the prompt and the KV cache (BundleSignatureError)
EMPTY_PROMPT = "{bundle}: generate needs a non-empty prompt and max_new_tokens >= 0"
PROMPT_IDS_RANGE = "{bundle}: prompt ids must lie in [0, {vocab_size})"
PROMPT_OVER_BUCKET = ("{bundle}: a prompt of {length} tokens is longer than the largest prefill bucket "
                      "({largest}); re-export with a larger prompt_buckets entry")
PROMPT_OVER_MAX_LEN = ("{bundle}: {length} prompt + {new_tokens} new tokens exceed the bundle's max_len "
                       "{max_len} (its KV cache); re-export with a larger max_len")
GENERATION_RUNNING = ("{bundle}: a generation is still running on this bundle; finish (or close) its stream "
                      "before starting another")

# text in, text out (BundleSignatureError)
NO_TOKENIZER = ("{bundle} was exported without a tokenizer, so it takes token ids, not text; re-export it "
                "with a tokenizer (export_decoder(..., tokenizer=tok) or torch-webgpu compile --decoder "
                "--tokenizer DIR), or give token ids")
NO_CHAT_TEMPLATE = ("{bundle}: the tokenizer has no chat template ({file} has no \"chat_template\"); "
                    "generate from plain text, or re-export with a tokenizer that has one")
CHAT_TEMPLATE_REFUSED = "{bundle}: the chat template refused the messages: {reason}"

# reading the tokenizer files (BundleFormatError; a file whose sha256 differs is a BundleIntegrityError)
TOKENIZER_UNREADABLE = ("{bundle}: {file} cannot be read as a Hugging Face tokenizer ({reason}); re-export "
                        "the bundle with a fast tokenizer")
TOKENIZER_CONFIG_UNREADABLE = ("{bundle}: {file} is not a JSON object of tokenizer settings ({reason}); "
                               "re-export the bundle")

# a Python package the text features need (ImportError)
MISSING_PACKAGE = "{feature} needs the Python package '{package}': pip install {package}"
