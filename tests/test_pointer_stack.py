"""`PointerVector` (the program counter) and `Stack` (the bounded return stack)."""

from __future__ import annotations

import threading

import pytest

from amrita_sense import PointerVector, Stack
from amrita_sense import types as sense_types

# ----- PointerVector: construction and reading ---------------------------------------------


def test_types_module_exports_the_same_classes():
    assert sense_types.PointerVector is PointerVector
    assert sense_types.Stack is Stack


def test_default_is_zero():
    assert list(PointerVector()) == [0]
    assert PointerVector().base_addr == [0]


def test_empty_base_defaults_to_zero():
    assert list(PointerVector([])) == [0]


def test_base_addr_holds_the_coordinates():
    assert PointerVector([1, 2, 3]).base_addr == [1, 2, 3]


def test_indexing_len_iteration():
    vec = PointerVector([4, 5, 6])
    assert (vec[0], vec[1], vec[-1]) == (4, 5, 6)
    assert len(vec) == 3
    assert list(iter(vec)) == [4, 5, 6]
    assert [x for x in vec] == [4, 5, 6]


def test_index_out_of_range_raises_index_error():
    with pytest.raises(IndexError):
        PointerVector([1])[3]


def test_item_assignment():
    vec = PointerVector([1, 2])
    vec[0] = 7
    vec[-1] = 9
    assert list(vec) == [7, 9]


def test_delete_item_raises_value_error():
    vec = PointerVector([1, 2])
    with pytest.raises(ValueError, match="Cannot delete"):
        del vec[0]
    assert list(vec) == [1, 2]


def test_truthiness_follows_contents():
    vec = PointerVector([3])
    assert vec
    vec.clear()
    assert not vec
    assert len(vec) == 0


def test_repr():
    assert repr(PointerVector([1, 2])) == "PointerVector([1, 2])"
    emptied = PointerVector([1])
    emptied.clear()
    assert repr(emptied) == "PointerVector([])"


# ----- PointerVector: mutators --------------------------------------------------------------


def test_offset_adds_to_the_last_coordinate_and_returns_self():
    vec = PointerVector([1, 2])
    assert vec.offset(3) is vec
    assert list(vec) == [1, 5]
    vec.offset(-5)
    assert list(vec) == [1, 0]


def test_near_to_sets_the_last_coordinate_and_returns_self():
    vec = PointerVector([1, 2, 3])
    assert vec.near_to(0) is vec
    assert list(vec) == [1, 2, 0]


def test_far_to_replaces_the_address_and_returns_self():
    vec = PointerVector([1, 2, 3])
    assert vec.far_to([9]) is vec
    assert list(vec) == [9]
    vec.far_to([4, 5, 6, 7])
    assert list(vec) == [4, 5, 6, 7]


def test_far_to_copies_its_argument():
    target = [1, 2]
    vec = PointerVector([0]).far_to(target)
    target.append(3)
    assert list(vec) == [1, 2]


def test_offset_far_element_wise_and_returns_self():
    vec = PointerVector([1, 2, 3])
    assert vec.offset_far([1, 0, -3]) is vec
    assert list(vec) == [2, 2, 0]


def test_offset_far_pads_the_pointer():
    assert list(PointerVector([1]).offset_far([0, 0, 2])) == [1, 0, 2]


def test_offset_far_pads_the_offset():
    assert list(PointerVector([1, 2, 3]).offset_far([1])) == [2, 2, 3]


def test_offset_far_truncates_at_the_first_negative_coordinate():
    assert list(PointerVector([3, 1]).offset_far([-1, -2, 5])) == [2]
    assert list(PointerVector([2, 0]).offset_far([0, -1])) == [2]
    assert list(PointerVector([1, 5, 2]).offset_far([0, 0, -3])) == [1, 5]


def test_offset_far_negative_first_coordinate_empties():
    vec = PointerVector([0, 5]).offset_far([-1, 3])
    assert list(vec) == []
    assert not vec


def test_offset_far_does_not_change_its_argument():
    offset = [1]
    PointerVector([1, 2]).offset_far(offset)
    assert offset == [1]


def test_pop_returns_the_last_coordinate():
    vec = PointerVector([1, 2])
    assert vec.pop() == 2
    assert list(vec) == [1]


def test_append_adds_a_coordinate():
    vec = PointerVector([1])
    vec.append(0)
    vec.append(4)
    assert list(vec) == [1, 0, 4]


def test_clear_empties():
    vec = PointerVector([1, 2])
    vec.clear()
    assert list(vec) == []


def test_copy_is_independent():
    vec = PointerVector([1, 2])
    copied = vec.copy()
    assert copied == vec
    assert copied is not vec
    copied.offset(1)
    vec.append(9)
    assert list(vec) == [1, 2, 9]
    assert list(copied) == [1, 3]


def test_mutators_chain():
    assert list(PointerVector([0]).far_to([1, 1]).offset(2).near_to(5).offset_far([1])) == [2, 5]


# ----- PointerVector: arithmetic and comparison -----------------------------------------------


def test_add_is_offset_far_on_a_copy():
    a, b = PointerVector([1, 2]), PointerVector([0, 0, 1])
    total = a + b
    assert list(total) == [1, 2, 1]
    assert isinstance(total, PointerVector)
    assert list(a) == [1, 2] and list(b) == [0, 0, 1]


def test_sub_negates_the_other_operand():
    a, b = PointerVector([3, 4]), PointerVector([1, 2])
    assert list(a - b) == [2, 2]
    assert list(a) == [3, 4]


def test_sub_truncates():
    assert list(PointerVector([1, 2]) - PointerVector([1, 5])) == [0]
    assert list(PointerVector([1, 2]) - PointerVector([2])) == []


def test_equality_by_value():
    assert PointerVector([1, 2]) == PointerVector([1, 2])
    assert PointerVector([1, 2]) != PointerVector([1, 3])
    assert PointerVector([1, 2]) != PointerVector([1, 2, 0])


def test_equality_only_with_the_same_type():
    assert PointerVector([1, 2]) != [1, 2]
    assert PointerVector([1, 2]) != (1, 2)
    assert not (PointerVector([1]) == 1)


def test_hash_is_the_tuple_hash():
    assert hash(PointerVector([1, 2])) == hash((1, 2))
    assert len({PointerVector([1]), PointerVector([1]), PointerVector([2])}) == 2


def test_thread_safe_offsets():
    vec = PointerVector([0])

    def bump():
        for _ in range(500):
            vec.offset(1)

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert list(vec) == [2000]


# ----- Stack -------------------------------------------------------------------------------------


def test_stack_default_limit():
    assert Stack().ovf == 1024


def test_stack_is_generic():
    stack = Stack[int](3)
    stack.push(1)
    assert stack.pop() == 1


def test_push_pop_lifo():
    stack = Stack()
    for i in range(3):
        stack.push(i)
    assert [stack.pop(), stack.pop(), stack.pop()] == [2, 1, 0]


def test_stack_list_attribute():
    stack = Stack()
    stack.push("a")
    stack.push("b")
    assert stack.stack == ["a", "b"]


def test_push_past_the_limit_overflows():
    stack = Stack(2)
    stack.push(1)
    stack.push(2)
    with pytest.raises(OverflowError, match="^Stack overflow$"):
        stack.push(3)
    assert stack.stack == [1, 2]


def test_default_limit_overflows_at_1024():
    stack = Stack()
    for i in range(1024):
        stack.push(i)
    with pytest.raises(OverflowError, match="Stack overflow"):
        stack.push(1024)


def test_zero_limit_refuses_every_push():
    with pytest.raises(OverflowError):
        Stack(0).push(1)


def test_pop_empty_raises_index_error():
    with pytest.raises(IndexError, match="Stack is empty"):
        Stack().pop()


def test_len_and_truthiness():
    stack = Stack()
    assert len(stack) == 0 and not stack
    stack.push(None)
    assert len(stack) == 1 and stack


def test_clear():
    stack = Stack()
    stack.push(1)
    stack.clear()
    assert len(stack) == 0
    with pytest.raises(IndexError):
        stack.pop()


def test_resize_only_changes_the_limit():
    stack = Stack(3)
    for i in range(3):
        stack.push(i)
    stack.resize(1)
    assert stack.ovf == 1
    assert stack.stack == [0, 1, 2]
    with pytest.raises(OverflowError):
        stack.push(3)
    stack.resize(10)
    stack.push(3)
    assert len(stack) == 4


def test_copy_is_shallow_and_keeps_the_limit():
    item = [1]
    stack = Stack(2)
    stack.push(item)
    copied = stack.copy()
    assert copied is not stack
    assert copied.ovf == 2
    assert copied.stack == [item] and copied.stack[0] is item
    copied.push("x")
    assert len(stack) == 1
    with pytest.raises(OverflowError):
        copied.push("y")


def test_repr_and_str_show_the_contents():
    stack = Stack()
    stack.push(1)
    stack.push("a")
    assert repr(stack) == repr([1, "a"])
    assert str(stack) == str([1, "a"])
