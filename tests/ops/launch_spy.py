"""Recording which library launches an eager op module makes (its `record_launch`)."""


def spy_launches(monkeypatch, module) -> list[str]:
    """The names of the launches `module.record_launch` records from now on (still recorded)."""
    names: list[str] = []
    record = module.record_launch

    def spy(launch, tensors):
        names.append(launch.name)
        record(launch, tensors)

    monkeypatch.setattr(module, "record_launch", spy)
    return names
