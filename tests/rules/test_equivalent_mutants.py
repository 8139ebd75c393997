"""Each equivalent-mutant argument still argues about the code as it is.

An argument is made about one function as written; when the function changes, mutmut renumbers
its mutants and the argument may no longer hold. Every entry pins the function's source digest
(tests/rules/equivalents.py), and this fails, naming the entry, when the function changed since.
"""

from __future__ import annotations

import importlib
import sys

from tests.rules.equivalents import code_of, digest, entries, stale


def test_every_argument_pins_the_code_as_it_is():
    assert entries(), "EQUIVALENT_MUTANTS.md argues for no mutant: the parser is blind"
    assert stale() == []


def test_mutant_names_map_to_their_functions():
    assert code_of("conduit.canonical.x_canonical_json__mutmut_4") == "conduit.canonical.canonical_json"
    assert code_of("replies.sender.claim.x__claim__mutmut_15") == "replies.sender.claim._claim"
    assert (
        code_of("reconcile.decisions.evidence.xǁHttpSemanticsModelǁanswer__mutmut_9")
        == "reconcile.decisions.evidence.HttpSemanticsModel.answer"
    )


def test_control_a_changed_function_or_a_missing_pin_is_reported(tmp_path, monkeypatch):
    """Positive control: an argument about a function edited since, or one that pins nothing,
    is named."""
    module = tmp_path / "pinned_rule_test.py"
    module.write_text("def rule(value):\n    return value.encode('utf-8')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = digest("pinned_rule_test.rule")
    text = (
        f"- `pinned_rule_test.x_rule__mutmut_1`: 'utf-8' becomes 'UTF-8', the same codec. "
        f"`code pinned_rule_test.rule@{before}`\n"
        "- `pinned_rule_test.x_rule__mutmut_2`: an argument that pins nothing.\n"
    )
    assert stale(text) == [
        "pinned_rule_test.x_rule__mutmut_2: its entry pins no `code pinned_rule_test.rule@…`"
    ]

    module.write_text("def rule(value):\n    return value.encode('utf-8', 'strict')\n")
    sys.modules.pop("pinned_rule_test", None)
    importlib.invalidate_caches()
    (changed, missing) = stale(text)
    # An argument that rests on this function, about another's mutant, is named too.
    resting = f"- `canonical.x_f__mutmut_1`: passed to rule. `code pinned_rule_test.rule@{before}`\n"
    assert stale(resting) == [
        "canonical.x_f__mutmut_1: its entry pins no `code canonical.f@…`",
        f"canonical.x_f__mutmut_1: the argument rests on pinned_rule_test.rule, changed since it was "
        f"made (pinned {before}, now {digest('pinned_rule_test.rule')}): re-check it",
    ]
    assert changed.startswith("pinned_rule_test.x_rule__mutmut_1: pinned_rule_test.rule changed since")
    assert before in changed and digest("pinned_rule_test.rule") in changed


def test_the_default_evidence_text_is_read_by_no_pattern_and_no_error_table():
    """The premise of the `"XXXX"` default-evidence argument (EQUIVALENT_MUTANTS.md): the model
    reads the text through its module's patterns and the transports' error tables only, and
    neither reads `"XXXX"` (or `""`) as anything."""
    import re

    from conduit.providers.registry import evidence_answers
    from reconcile.decisions import evidence

    patterns = [v for v in vars(evidence).values() if isinstance(v, re.Pattern)]
    assert len(patterns) == 10
    for text in ("XXXX", ""):
        assert [p.pattern for p in patterns if p.search(text)] == []
        assert text not in evidence_answers()


def test_the_senders_backoff_base_is_the_helpers_default():
    """The premise of the `base=` argument (EQUIVALENT_MUTANTS.md): the sender's base and the default
    base of conduit.backoff.backoff_delay are the same number of seconds."""
    import inspect

    from conduit import backoff
    from replies.contract import BACKOFF_BASE_SECONDS

    default = inspect.signature(backoff.backoff_delay).parameters["base"].default
    assert BACKOFF_BASE_SECONDS == default == backoff.BASE_SECONDS == 5


def test_no_adapter_decides_an_undeclared_familys_recovery_by_its_type():
    """The premise of the `undeclared_family("")` argument (EQUIVALENT_MUTANTS.md): every
    registered adapter answers the same recovery for an undeclared type whatever the type is."""
    from conduit.providers.registry import ADAPTERS

    for name, cls in ADAPTERS.items():
        adapter = cls()
        recoveries = {adapter.undeclared_family(t).recovery for t in ("", "XXXX", None, "story.mention")}
        assert len(recoveries) == 1, (name, recoveries)
