"""Source adapters by name: each module owns one provider's proof and field map."""

from ingress.sources.base import SourceAdapter
from ingress.sources.sandbox_social import SandboxSocialAdapter

ADAPTERS: dict[str, SourceAdapter] = {
    adapter.name: adapter for adapter in (SandboxSocialAdapter(),)
}


def get_adapter(name: str) -> SourceAdapter:
    try:
        return ADAPTERS[name]
    except KeyError:
        known = ", ".join(sorted(ADAPTERS))
        raise KeyError(f"unknown adapter {name!r}; known adapters: {known}") from None
