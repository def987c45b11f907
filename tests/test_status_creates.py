"""Creates written ahead (pure): which creates a pass sends, holds back or sends once more."""

from __future__ import annotations

from dataclasses import replace

from reconciler.status.creates import (
    INDEXING_DELAY,
    CreateIntent,
    Found,
    Wanted,
    answered,
    gate,
    read_creates,
    with_creates,
)

URL, PROJECT = "https://api.example.com", "p1"
T0 = 1_790_000_000.0
WANT = Wanted(URL, PROJECT, "ns-a", "MLPlatform", "ns", "a")


def _never(_intent: CreateIntent) -> bool:
    raise AssertionError("no lookup within the indexing delay")


def test_a_create_without_an_intent_is_sent_and_recorded() -> None:
    decided = gate((), [WANT], {}, T0, _never)
    assert decided.send == (WANT,) and decided.intents == (WANT.intent(T0),) and not decided.held


def test_within_the_delay_an_open_intent_holds_the_create_back() -> None:
    decided = gate([WANT.intent(T0)], [WANT], {(URL, PROJECT): ["other"]}, T0 + 10, _never)
    assert decided.send == () and decided.intents == (WANT.intent(T0),)
    assert "no second create" in decided.held[((URL, PROJECT), "ns-a")]


def test_the_listing_resolves_an_intent() -> None:
    decided = gate([WANT.intent(T0)], [], {(URL, PROJECT): ["ns-a"]}, T0 + 10, _never)
    assert decided.intents == () and decided.send == ()


def test_after_the_delay_a_lookup_by_name_decides() -> None:
    found = gate([WANT.intent(T0)], [WANT], {}, T0 + INDEXING_DELAY, lambda i: True)
    assert found.send == () and found.intents == (WANT.intent(T0),)
    absent = gate([WANT.intent(T0)], [WANT], {}, T0 + INDEXING_DELAY, lambda i: False)
    assert absent.send == (WANT,) and absent.intents == (WANT.intent(T0 + INDEXING_DELAY),)


def test_an_intent_nobody_wants_expires_after_the_delay() -> None:
    assert gate([WANT.intent(T0)], [], {}, T0 + 1, _never).intents == (WANT.intent(T0),)
    assert gate([WANT.intent(T0)], [], {}, T0 + INDEXING_DELAY, _never).intents == ()


def test_intents_round_trip_through_reconciler_yaml() -> None:
    files = {"reconciler.yaml": b"branch: main\nrevision: abc\ntargets: []\n"}
    written = with_creates(files, [WANT.intent(T0 + 0.5)])
    assert read_creates(written) == (WANT.intent(T0 + 0.5),)
    assert b"branch: main" in written["reconciler.yaml"]
    assert b"creates" not in with_creates(written, [])["reconciler.yaml"]


def test_a_create_answered_with_a_uid_resolves_its_intent_to_it() -> None:
    open_ = (WANT.intent(T0), Wanted(URL, PROJECT, "ns-b", "ComputePool", "ns", "b").intent(T0))
    done = answered(open_, {("MLPlatform", "ns", "a"): "uid-a"})
    assert [i.uid for i in done] == ["uid-a", None]
    assert read_creates(with_creates({}, done)) == done  # the uid is recorded


def test_an_intent_resolved_to_a_uid_is_read_by_that_uid_and_never_created_again() -> None:
    intent = replace(WANT.intent(T0), uid="uid-a")
    asked: list[CreateIntent] = []

    def lookup(i: CreateIntent) -> Found:
        asked.append(i)
        return "uid-a"

    within = gate([intent], [WANT], {}, T0 + 1, _never)
    assert within.send == () and "created as uid-a" in within.held[((URL, PROJECT), "ns-a")]
    after = gate([intent], [WANT], {}, T0 + 5 * INDEXING_DELAY, lookup)
    assert after.send == () and after.intents == (intent,) and asked == [intent]
    gone = gate([intent], [WANT], {}, T0 + 5 * INDEXING_DELAY, lambda i: False)
    assert gone.send == (WANT,)  # the cluster it was created as is gone: created once more


def test_a_lookup_by_name_that_finds_the_cluster_resolves_the_intent_to_its_uid() -> None:
    found = gate([WANT.intent(T0)], [WANT], {}, T0 + INDEXING_DELAY, lambda i: "uid-a")
    assert found.send == () and found.intents == (replace(WANT.intent(T0), uid="uid-a"),)
    unknown = gate([WANT.intent(T0)], [WANT], {}, T0 + INDEXING_DELAY, lambda i: True)
    assert unknown.send == () and unknown.intents == (WANT.intent(T0),)
