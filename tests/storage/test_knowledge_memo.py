"""The memory of an empty knowledge base (`storage.knowledge.EmptyMemo`): "empty" for its
time-to-live after the database said so, forgotten at once by a change of this process,
and not believed when the change came while the database was being asked."""

from __future__ import annotations

from storage.knowledge import EmptyMemo


def test_empty_is_remembered_for_its_time_only() -> None:
    now = [100.0]
    memo = EmptyMemo(ttl=1.5, clock=lambda: now[0])
    assert not memo.known_empty()
    memo.saw_empty(memo.changes)
    now[0] += 1.4
    assert memo.known_empty()
    now[0] += 0.1
    assert not memo.known_empty()


def test_a_change_of_this_process_is_seen_at_once() -> None:
    memo = EmptyMemo(ttl=10, clock=lambda: 0.0)
    memo.saw_empty(memo.changes)
    memo.forget()
    assert not memo.known_empty()


def test_an_answer_older_than_a_change_is_not_remembered() -> None:
    """A search that started before this process added a document and found nothing
    does not make the next search skip the new document."""
    memo = EmptyMemo(ttl=10, clock=lambda: 0.0)
    asked_at = memo.changes
    memo.forget()
    memo.saw_empty(asked_at)
    assert not memo.known_empty()
