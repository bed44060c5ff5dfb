"""Bad input at each check added for robustness, and the exception 1.1.3 raises for the same input.

A trigger gives one bad input and then uses it as a program would (render, construct, run, call),
so on 1.1.3 it reaches whatever failure 1.1.3 has for it, at that site or later; ours raises at
the check. `CASES` maps a case to (trigger, the type 1.1.3 raises, where 1.1.3 raises it: "same"
at the same call, else the stage it gets to first). `ACCEPTED` lists inputs 1.1.3 takes without
ever raising (or then waits forever, reported as `Hung`), with our type.

`tests/test_bad_input_types.py` checks that ours is an instance of 1.1.3's type for every case, on
both builds. Run this file with a 1.1.3 interpreter (`python tests/support/bad_inputs.py`, with
AMRITA_SENSE_TURBO=0) to check the table against 1.1.3: it prints each case that does not match
and exits non-zero (`--dump` prints every outcome).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

from amrita_sense import WorkflowInterpreter

STAGE = ["input"]
"""The stage a trigger is at: "input" (the bad input itself), then "render", "construct", "run"."""


class Hung(Exception):
    """A run that did not end (1.1.3 waits forever for some inputs)."""


def _at(stage: str) -> None:
    STAGE[0] = stage


def _node(name: str = "step", result: Any = None) -> Any:
    from amrita_sense import Node

    def step() -> Any:
        return result

    step.__name__ = name
    return Node(wrap_to_async=False)(step)


def _raiser() -> Any:
    from amrita_sense import Node

    @Node(wrap_to_async=False)
    def boom() -> None:
        raise ValueError("boom")

    return boom


def _graph(*parts: Any) -> Any:
    from amrita_sense import NodeCompose

    _at("render")
    return NodeCompose(*(parts or (_node(),))).render()


def _interp(graph: Any = None, **kwargs: Any) -> Any:
    graph = _graph() if graph is None else graph
    _at("construct")
    return WorkflowInterpreter(graph, **kwargs)


def _run(interp: Any, timeout: float = 2.0) -> None:
    _at("run")

    async def go() -> None:
        try:
            await asyncio.wait_for(interp.run(), timeout)
        except asyncio.TimeoutError:
            raise Hung(f"the run did not end in {timeout}s") from None

    asyncio.run(go())


def _run_parts(*parts: Any, **kwargs: Any) -> None:
    _run(_interp(_graph(*parts), **kwargs))


def _branch() -> Any:
    """A graph whose run pushes the return stack (an IF calls its condition and body)."""
    from amrita_sense import IF

    return _graph(IF(_node("cond", True), _node("body")))


def _in_node(action: Callable[[Any], Any]) -> None:
    """Run `action(pc)` from inside a node of a running interpreter."""
    from amrita_sense import Node

    @Node(wrap_to_async=False)
    def act(pc: WorkflowInterpreter) -> None:
        _at("input")
        action(pc)

    _run_parts(act, _node("after"))


def _in_async_node(action: Callable[[Any], Any]) -> None:
    """Await `action(pc)` from inside an async node of a running interpreter."""
    from amrita_sense import Node

    @Node()
    async def act(pc: WorkflowInterpreter) -> None:
        _at("input")
        await action(pc)

    _run_parts(act, _node("after"))


# ----- nodes and compositions --------------------------------------------------------------------


def node_of_a_non_callable() -> None:
    from amrita_sense import Node

    _run_parts(Node(wrap_to_async=False)(5))


def node_tag_not_a_string() -> None:
    from amrita_sense import Node

    def step() -> None:
        pass

    _run_parts(Node(tag=5, wrap_to_async=False)(step))


def compose_shift_a_rendered_graph() -> None:
    from amrita_sense import NodeCompose

    rendered = _graph()
    _at("input")
    compose = NodeCompose(_node()) >> rendered
    _at("render")
    compose.render()


def compose_child_not_a_node() -> None:
    _run_parts(_node(), 5)


def interpreter_of_an_unrendered_compose() -> None:
    from amrita_sense import NodeCompose

    _run(WorkflowInterpreter(NodeCompose(_node())))


def interpreter_of_a_non_graph() -> None:
    _run(WorkflowInterpreter(5))


# ----- WorkflowInterpreter(...) arguments --------------------------------------------------------


def _construct(**kwargs: Any) -> Any:
    graph = _branch()
    _at("input")
    return WorkflowInterpreter(graph, **kwargs)


def object_io_not_a_stream() -> None:
    _run(_construct(object_io=5))


def parent_not_an_interpreter() -> None:
    _run(_construct(parent_interpreter=5))


def exception_ignored_holds_a_non_class() -> None:
    from amrita_sense import Try

    graph = _graph(Try(_raiser()).CATCH(ValueError, _node("handler")))
    _at("input")
    _run(WorkflowInterpreter(graph, exception_ignored=(5,)))


def exception_ignored_not_a_tuple() -> None:
    _run(_construct(exception_ignored=5))


def extra_args_not_a_tuple() -> None:
    _run(_construct(extra_args=5))


def extra_kwargs_not_a_mapping() -> None:
    _run(_construct(extra_kwargs=5))


def extra_kwargs_a_list() -> None:
    _run(_construct(extra_kwargs=[1]))


def addr_stack_not_a_stack() -> None:
    _run(_construct(addr_stack=5))


def context_stack_not_a_stack() -> None:
    interp = _construct(context_stack=5)
    _at("run")
    interp.reset()


def middleware_not_callable() -> None:
    _run(_construct(middleware=5))


# ----- fork_interpreter ------------------------------------------------------------------------


def _fork(**kwargs: Any) -> None:
    parent = _interp(_branch())
    _at("input")
    child = parent.fork_interpreter(None, **kwargs)
    _run(child)


def fork_ava_args_not_a_tuple() -> None:
    _fork(ava_args=5)


def fork_ava_kwargs_not_a_mapping() -> None:
    _fork(ava_kwargs=5)


def fork_middleware_not_callable() -> None:
    _fork(middleware=5)


def fork_object_io_not_a_stream() -> None:
    _fork(object_io=5)


# ----- the kept private attributes ---------------------------------------------------------------


def _field(name: str, value: Any) -> None:
    interp = _interp(_branch())
    _at("input")
    setattr(interp, name, value)
    _run(interp)
    interp.reset()


def field_pointer(value: Any = 5) -> None:
    _field("_pointer", value)


def field_pointer_a_list() -> None:
    _field("_pointer", [0])


def field_ret_addr_stack() -> None:
    _field("_ret_addr_stack", 5)


def field_context_stack() -> None:
    _field("_context_stack", 5)


def field_interpret_lock() -> None:
    _field("_interpret_lock", 5)


def field_middleware() -> None:
    _field("_middleware", 5)


def field_panic_exc() -> None:
    _field("_panic_exc", 5)


def field_waiter_fut() -> None:
    _field("_waiter_fut", 5)


def field_ava_args() -> None:
    _field("_ava_args", 5)


def field_ava_kwargs() -> None:
    _field("_ava_kwargs", 5)


def field_object_io() -> None:
    _field("object_io", 5)


def field_flags_not_an_int() -> None:
    _field("_flags", "x")


def field_flags_unknown_bits() -> None:
    _field("_flags", 1 << 10)


def field_if_flag_not_a_bool() -> None:
    _field("if_flag", 5)


def field_graph() -> None:
    _field("_graph", 5)


def field_sub_interpreters() -> None:
    interp = _interp()
    _at("input")
    interp._sub_interpreters = None
    _run(interp.fork_interpreter(None))


def field_exc_ignored_in_a_try() -> None:
    from amrita_sense import Try

    interp = _interp(_graph(Try(_raiser()).CATCH(ValueError, _node("handler"))))
    _at("input")
    interp._exc_ignored = 5
    _run(interp)


def field_parent_interpreter_then_leave() -> None:
    interp = _interp()
    _at("input")
    interp._parent_interpreter = 5
    _run(interp)
    asyncio.run(interp.terminate())


def field_top_interpreter_then_fork() -> None:
    interp = _interp()
    _at("input")
    interp._top_interpreter = 5
    _run(interp.fork_interpreter(None))


def field_di_cache() -> None:
    _field("_di_cache", 5)


def field_deleted(name: str = "_pointer") -> None:
    interp = _interp(_branch())
    _at("input")
    delattr(interp, name)
    _run(interp)


# ----- PointerVector and Stack ---------------------------------------------------------------------


def _vector(base: Any) -> None:
    from amrita_sense import PointerVector

    vector = PointerVector(base)
    _at("run")
    vector.copy().offset(1)
    list(vector)


def pointer_of_zero() -> None:
    _vector(0)


def pointer_of_a_negative_int() -> None:
    _vector(-1)


def pointer_of_a_string() -> None:
    _vector("ab")


def _vector_call(method: str, *args: Any) -> None:
    from amrita_sense import PointerVector

    vector = PointerVector([0, 1])
    getattr(vector, method)(*args)
    _at("run")
    vector.copy().offset(1)
    list(vector)


def pointer_set_base_addr() -> None:
    from amrita_sense import PointerVector

    vector = PointerVector([0])
    vector.base_addr = 5
    _at("run")
    vector.copy().offset(1)


def pointer_far_to() -> None:
    _vector_call("far_to", 5)


def pointer_offset_far() -> None:
    _vector_call("offset_far", 5)


def pointer_offset() -> None:
    _vector_call("offset", "x")


def pointer_near_to() -> None:
    _vector_call("near_to", "x")


def pointer_append() -> None:
    _vector_call("append", "x")


def pointer_setitem() -> None:
    from amrita_sense import PointerVector

    vector = PointerVector([0, 1])
    vector[0] = "x"
    _at("run")
    vector.offset_far([1, 1])


def pointer_add() -> None:
    from amrita_sense import PointerVector

    PointerVector([0]) + 5


def pointer_sub() -> None:
    from amrita_sense import PointerVector

    PointerVector([0]) - 5


def _stack_use(stack: Any) -> None:
    _at("run")
    stack.push(1)
    stack.pop()
    len(stack)


def stack_capacity_not_an_int() -> None:
    from amrita_sense import Stack

    _stack_use(Stack("x"))


def stack_resize() -> None:
    from amrita_sense import Stack

    stack = Stack()
    stack.resize("x")
    _stack_use(stack)


def stack_set_ovf() -> None:
    from amrita_sense import Stack

    stack = Stack()
    stack.ovf = "x"
    _stack_use(stack)


def stack_set_stack() -> None:
    from amrita_sense import Stack

    stack = Stack()
    stack.stack = 5
    _stack_use(stack)


# ----- address and index arguments ---------------------------------------------------------------


def jump_to_a_string() -> None:
    _in_node(lambda pc: pc.jump_to("x"))


def jump_to_an_int() -> None:
    _in_node(lambda pc: pc.jump_to(5))


def jump_far_ptr() -> None:
    _in_node(lambda pc: pc.jump_far_ptr(5))


def jump_offset_far() -> None:
    _in_node(lambda pc: pc.jump_offset_far(5))


def rebase_ptr() -> None:
    _in_node(lambda pc: pc.rebase_ptr(5))


def jump_near() -> None:
    _in_node(lambda pc: pc.jump_near("x"))


def jump_offset() -> None:
    _in_node(lambda pc: pc.jump_offset("x"))


def jump_to_top() -> None:
    _in_node(lambda pc: pc.jump_to_top("x"))


def jump_offset_top() -> None:
    _in_node(lambda pc: pc.jump_offset_top("x"))


def call_sub() -> None:
    _in_async_node(lambda pc: pc.call_sub(5))


def call_sub_none() -> None:
    _in_async_node(lambda pc: pc.call_sub(None))


def call_offset_far() -> None:
    _in_async_node(lambda pc: pc.call_offset_far(5))


def call_near() -> None:
    _in_async_node(lambda pc: pc.call_near("x"))


def call_offset() -> None:
    _in_async_node(lambda pc: pc.call_offset("x"))


def advance_pointer() -> None:
    interp = _interp()
    _at("input")
    interp.advance_pointer([0])


def rebase_context_of_a_non_context() -> None:
    interp = _interp()
    _at("input")
    interp.rebase_context(5)
    _run(interp)


def rebase_context_of_a_bad_stack() -> None:
    from amrita_sense import PointerVector
    from amrita_sense.runtime.types import InterpreterContext

    interp = _interp(_branch())
    _at("input")
    interp.rebase_context(InterpreterContext(ptr=PointerVector([0]), exception_ignored=(), stack=5))
    _run(interp)


# ----- instructions ------------------------------------------------------------------------------


def alias_of_a_non_node() -> None:
    from amrita_sense import ALIAS

    _run_parts(ALIAS(5, "a"))


def alias_name_not_a_string() -> None:
    from amrita_sense import ALIAS

    _run_parts(ALIAS(_node(), 5))


def jmp_target_a_float() -> None:
    from amrita_sense import JMP

    _run_parts(JMP(1.5), _node())


def call_target_a_float() -> None:
    from amrita_sense import CALL

    _run_parts(CALL(1.5), _node())


def push_ret_target_a_float() -> None:
    from amrita_sense.instructions import PUSH_RET

    _run_parts(PUSH_RET(1.5), _node())


def invoke_name_not_a_string() -> None:
    from amrita_sense import INVOKE

    _run_parts(INVOKE(5))


def fn_name_not_a_string() -> None:
    from amrita_sense.instructions import FN

    _run_parts(FN(5, _node()))


def inter_fn_name_not_a_string() -> None:
    from amrita_sense.instructions import INTER_FN

    _run_parts(INTER_FN(5, _node()))


def if_condition_not_a_node() -> None:
    from amrita_sense import IF

    _run_parts(IF(5, _node()))


def if_body_not_a_node() -> None:
    from amrita_sense import IF

    _run_parts(IF(_node("cond", True), 5))


def elif_condition_not_a_node() -> None:
    from amrita_sense import IF

    _run_parts(IF(_node("cond", False), _node()).ELIF(5, _node()))


def else_body_not_a_node() -> None:
    from amrita_sense import IF

    _run_parts(IF(_node("cond", False), _node()).ELSE(5))


def while_condition_not_a_node() -> None:
    from amrita_sense import WHILE

    _run_parts(WHILE(5).ACTION(_node()))


def while_action_not_a_node() -> None:
    from amrita_sense import WHILE

    _run_parts(WHILE(_node("cond", False)).ACTION(5))


def do_body_not_a_node() -> None:
    from amrita_sense import DO

    _run_parts(DO(5).WHILE(_node("cond", False)))


def do_condition_not_a_node() -> None:
    from amrita_sense import DO

    _run_parts(DO(_node()).WHILE(5))


def try_body_not_a_node() -> None:
    from amrita_sense import Try

    _run_parts(Try(5).CATCH(ValueError, _node()))


def catch_handler_not_a_node() -> None:
    from amrita_sense import Try

    _run_parts(Try(_raiser()).CATCH(ValueError, 5))


def catch_class_not_an_exception() -> None:
    from amrita_sense import Try

    _run_parts(Try(_raiser()).CATCH(5, _node()))


def finally_not_a_node() -> None:
    from amrita_sense import Try

    _run_parts(Try(_node()).CATCH(ValueError, _node()).FINALLY(5))


def then_none() -> None:
    from amrita_sense import Try

    _run_parts(Try(_node()).CATCH(ValueError, _node()).THEN(None))


def archived_nodes_not_nodes() -> None:
    from amrita_sense import ARCHIVED_NODES

    _run_parts(ARCHIVED_NODES(5), _node())


def batch_run_not_nodes() -> None:
    from amrita_sense.instructions import BATCH_RUN

    _run_parts(BATCH_RUN(5))


def batch_run_middleware_not_callable() -> None:
    from amrita_sense.instructions import BATCH_RUN

    _run_parts(BATCH_RUN(_node(), middleware=5))


def native_if_condition_not_a_node() -> None:
    from amrita_sense.instructions import NATIVE_IF

    _run_parts(NATIVE_IF(5, _node()))


def native_if_body_not_a_node() -> None:
    from amrita_sense.instructions import NATIVE_IF

    _run_parts(NATIVE_IF(_node("cond", True), 5))


def native_while_condition_not_a_node() -> None:
    from amrita_sense.instructions import NATIVE_WHILE

    _run_parts(NATIVE_WHILE(5).ACTION(_node()))


def native_do_body_not_a_node() -> None:
    from amrita_sense.instructions import NATIVE_DO

    _run_parts(NATIVE_DO(5).WHILE(_node("cond", False)))


def trigger_event_of_a_non_event() -> None:
    from amrita_sense import TRIGGER_EVENT

    _run_parts(TRIGGER_EVENT("not_an_event"))


def trigger_event_of_a_class_without_constructor() -> None:
    from amrita_sense import TRIGGER_EVENT

    class Plain:
        pass

    _run_parts(TRIGGER_EVENT(Plain))


def fun_block_of_a_non_graph() -> None:
    from amrita_sense.instructions import FUN_BLOCK

    _run_parts(FUN_BLOCK(5))


def fun_block_of_none() -> None:
    from amrita_sense.instructions import FUN_BLOCK

    _run_parts(FUN_BLOCK(None))


def fun_block_middleware_not_callable() -> None:
    from amrita_sense.instructions import FUN_BLOCK

    sub = _graph()
    _at("input")
    _run_parts(FUN_BLOCK(sub, middleware=5))


def fun_block_object_io_not_a_stream() -> None:
    from amrita_sense.instructions import FUN_BLOCK

    sub = _graph()
    _at("input")
    _run_parts(FUN_BLOCK(sub, object_io=5))


def int_if_state_not_a_bool() -> None:
    from amrita_sense import ALIAS
    from amrita_sense.instructions import INT, IRET

    _run_parts(INT("handler", if_state=5), _node(), ALIAS(_node("handler"), "handler"), IRET())


# ----- events --------------------------------------------------------------------------------------


def on_event_type_not_a_string() -> None:
    from amrita_sense import on_event

    @on_event(5)
    async def handler() -> None:
        pass


def on_event_priority_not_an_int() -> None:
    from amrita_sense import on_event

    @on_event("bad.priority", priority="x")
    async def handler() -> None:
        pass


def trigger_event_constructor_gives_a_non_event() -> None:
    from amrita_sense import TRIGGER_EVENT
    from amrita_sense.hook.event import ConstructableEvent

    class Made(ConstructableEvent):
        @classmethod
        def constructor(cls) -> Any:
            return 5

        def get_event_type(self) -> str:
            return "made"

        @property
        def event_type(self) -> str:
            return "made"

    _run_parts(TRIGGER_EVENT(Made))


def trigger_event_call_of_a_non_event() -> None:
    from amrita_sense import MatcherFactory

    _at("run")
    asyncio.run(MatcherFactory.trigger_event(5))


# ----- debugger ------------------------------------------------------------------------------------


def debugger_command_of_a_non_interpreter() -> None:
    from amrita_sense.debugger.inspect import where

    where(5)


def resolve_dis_of_a_non_node() -> None:
    from amrita_sense.debugger.code_disp import resolve_dis

    resolve_dis(5)


def resolve_cmt_of_a_non_node() -> None:
    from amrita_sense.debugger.code_disp import resolve_cmt

    resolve_cmt(5)


def disassemble_around_negative() -> None:
    from amrita_sense.debugger.code_disp import disassemble

    interp = _interp()
    _at("input")
    disassemble(interp, around=-1)


def breakpoint_address_not_an_address() -> None:
    from amrita_sense.debugger.breakpoint import break_at_addr

    interp = _interp()
    _at("input")
    break_at_addr(interp, 5)
    _run(interp)


def breakpoint_tag_not_a_string() -> None:
    from amrita_sense.debugger.breakpoint import break_at_tag

    interp = _interp()
    _at("input")
    break_at_tag(interp, 5)
    _run(interp)


def breakpoint_condition_not_callable() -> None:
    from amrita_sense.debugger.breakpoint import break_at_tag

    interp = _interp()
    _at("input")
    break_at_tag(interp, "step", condition=5)
    _run(interp)


# ----- dependency scopes and streams -------------------------------------------------------------


def lifecycle_scope_unknown_name() -> None:
    from amrita_sense.di import LifecycleScope

    scope = LifecycleScope("bogus")
    _at("run")

    async def use() -> None:
        async with scope:
            pass

    asyncio.run(use())


def _stream(**kwargs: Any) -> Any:
    from amrita_sense.streaming import SuspendObjectStream

    return SuspendObjectStream(**kwargs)


def stream_queue_size_negative() -> None:
    _stream(queue_size=-1)


def stream_queue_size_not_a_number() -> None:
    _stream(queue_size="x")


def stream_queue_timeout_not_a_number() -> None:
    stream = _stream(queue_timeout="x")
    _at("run")

    async def use() -> None:
        await stream.push_object(1)

    asyncio.run(use())


def stream_callback_not_callable() -> None:
    stream = _stream(callback=5)
    _at("run")

    async def use() -> None:
        await stream.yield_response(1)

    asyncio.run(use())


def wait_to_suspend_tag_not_a_string() -> None:
    stream = _stream()

    async def use() -> None:
        try:
            await asyncio.wait_for(stream.wait_to_suspend(5), 0.5)
        except asyncio.TimeoutError:
            raise Hung("wait_to_suspend never returned") from None

    asyncio.run(use())


def wait_to_suspend_timeout_not_a_number() -> None:
    stream = _stream()

    async def use() -> None:
        try:
            await asyncio.wait_for(stream.wait_to_suspend("tag", timeout="x"), 0.5)
        except asyncio.TimeoutError:
            raise Hung("wait_to_suspend never returned") from None

    asyncio.run(use())


# ----- the table ---------------------------------------------------------------------------------

_AE, _TE, _VE = "AttributeError", "TypeError", "ValueError"

CASES: dict[str, tuple[Callable[[], None], str, str]] = {
    # nodes and compositions
    "Node()(5)": (node_of_a_non_callable, _TE, "same"),
    "compose >> rendered graph": (compose_shift_a_rendered_graph, _AE, "render"),
    "compose holding 5": (compose_child_not_a_node, _AE, "render"),
    "WorkflowInterpreter(NodeCompose)": (interpreter_of_an_unrendered_compose, _AE, "run"),
    "WorkflowInterpreter(5)": (interpreter_of_a_non_graph, _AE, "run"),
    # WorkflowInterpreter(...) arguments
    "object_io=5": (object_io_not_a_stream, _AE, "run"),
    "parent_interpreter=5": (parent_not_an_interpreter, _AE, "same"),
    "exception_ignored=(5,)": (exception_ignored_holds_a_non_class, _TE, "run"),
    "exception_ignored=5": (exception_ignored_not_a_tuple, _TE, "same"),
    "extra_args=5": (extra_args_not_a_tuple, _TE, "same"),
    "extra_kwargs=5": (extra_kwargs_not_a_mapping, _AE, "same"),
    "extra_kwargs=[1]": (extra_kwargs_a_list, _AE, "same"),
    "addr_stack=5": (addr_stack_not_a_stack, _AE, "run"),
    "context_stack=5": (context_stack_not_a_stack, _AE, "run"),
    "middleware=5": (middleware_not_callable, _TE, "run"),
    # fork_interpreter
    "fork_interpreter(ava_args=5)": (fork_ava_args_not_a_tuple, _TE, "same"),
    "fork_interpreter(ava_kwargs=5)": (fork_ava_kwargs_not_a_mapping, _TE, "same"),
    "fork_interpreter(middleware=5)": (fork_middleware_not_callable, "AssertionError", "same"),
    "fork_interpreter(object_io=5)": (fork_object_io_not_a_stream, _AE, "run"),
    # the kept private attributes
    "_pointer = 5": (field_pointer, _AE, "run"),
    "_pointer = [0]": (field_pointer_a_list, _AE, "run"),
    "_ret_addr_stack = 5": (field_ret_addr_stack, _AE, "run"),
    "_context_stack = 5": (field_context_stack, _AE, "run"),
    "_interpret_lock = 5": (field_interpret_lock, _TE, "run"),
    "_middleware = 5": (field_middleware, _TE, "run"),
    "_waiter_fut = 5": (field_waiter_fut, _AE, "run"),
    "_ava_args = 5": (field_ava_args, _TE, "run"),
    "_ava_kwargs = 5": (field_ava_kwargs, _AE, "run"),
    "object_io = 5": (field_object_io, _AE, "run"),
    "_flags = 'x'": (field_flags_not_an_int, _VE, "run"),
    "if_flag = 5": (field_if_flag_not_a_bool, _TE, "same"),
    "_graph = 5": (field_graph, _AE, "run"),
    "_exc_ignored = 5": (field_exc_ignored_in_a_try, _TE, "run"),
    "_parent_interpreter = 5": (field_parent_interpreter_then_leave, _AE, "run"),
    "_top_interpreter = 5": (field_top_interpreter_then_fork, _AE, "same"),
    "_sub_interpreters = None": (field_sub_interpreters, _TE, "same"),
    "_di_cache = 5": (field_di_cache, _AE, "run"),
    "del _pointer": (field_deleted, _AE, "run"),
    # PointerVector and Stack
    "PointerVector(-1)": (pointer_of_a_negative_int, _AE, "run"),
    "PointerVector('ab')": (pointer_of_a_string, _AE, "run"),
    "PointerVector.base_addr = 5": (pointer_set_base_addr, _AE, "run"),
    "PointerVector.far_to(5)": (pointer_far_to, _TE, "same"),
    "PointerVector.offset_far(5)": (pointer_offset_far, _AE, "same"),
    "PointerVector.offset('x')": (pointer_offset, _TE, "same"),
    "PointerVector.near_to('x')": (pointer_near_to, _TE, "run"),
    "PointerVector.append('x')": (pointer_append, _TE, "run"),
    "PointerVector[0] = 'x'": (pointer_setitem, _TE, "run"),
    "PointerVector + 5": (pointer_add, _AE, "same"),
    "PointerVector - 5": (pointer_sub, _AE, "same"),
    "Stack('x')": (stack_capacity_not_an_int, _TE, "run"),
    "Stack.resize('x')": (stack_resize, _TE, "run"),
    "Stack.ovf = 'x'": (stack_set_ovf, _TE, "run"),
    "Stack.stack = 5": (stack_set_stack, _TE, "run"),
    # address and index arguments (from a node)
    "jump_to('x')": (jump_to_a_string, _TE, "same"),
    "jump_to(5)": (jump_to_an_int, _TE, "same"),
    "jump_far_ptr(5)": (jump_far_ptr, _TE, "same"),
    "jump_offset_far(5)": (jump_offset_far, _AE, "same"),
    "rebase_ptr(5)": (rebase_ptr, _AE, "same"),
    "jump_near('x')": (jump_near, _TE, "same"),
    "jump_offset('x')": (jump_offset, _TE, "same"),
    "jump_to_top('x')": (jump_to_top, _TE, "same"),
    "jump_offset_top('x')": (jump_offset_top, _TE, "same"),
    "call_sub(5)": (call_sub, _TE, "same"),
    "call_offset_far(5)": (call_offset_far, _AE, "same"),
    "call_near('x')": (call_near, _TE, "same"),
    "call_offset('x')": (call_offset, _TE, "same"),
    "advance_pointer([0])": (advance_pointer, _AE, "same"),
    "rebase_context(5)": (rebase_context_of_a_non_context, _AE, "same"),
    "rebase_context(stack=5)": (rebase_context_of_a_bad_stack, _AE, "run"),
    # instructions
    "ALIAS(5, alias)": (alias_of_a_non_node, _AE, "same"),
    "JMP(1.5)": (jmp_target_a_float, _TE, "render"),
    "CALL(1.5)": (call_target_a_float, _TE, "run"),
    "INVOKE(5)": (invoke_name_not_a_string, _TE, "render"),
    "IF(5, body)": (if_condition_not_a_node, _AE, "render"),
    "IF(cond, 5)": (if_body_not_a_node, _AE, "render"),
    "ELIF(5, body)": (elif_condition_not_a_node, _AE, "render"),
    "ELSE(5)": (else_body_not_a_node, _AE, "render"),
    "WHILE(5)": (while_condition_not_a_node, _AE, "render"),
    "WHILE(cond).ACTION(5)": (while_action_not_a_node, _AE, "render"),
    "DO(5)": (do_body_not_a_node, _AE, "render"),
    "DO(body).WHILE(5)": (do_condition_not_a_node, _AE, "render"),
    "Try(5)": (try_body_not_a_node, _AE, "render"),
    "CATCH(ValueError, 5)": (catch_handler_not_a_node, _AE, "render"),
    "CATCH(5, handler)": (catch_class_not_an_exception, _TE, "run"),
    "FINALLY(5)": (finally_not_a_node, _AE, "render"),
    "ARCHIVED_NODES(5)": (archived_nodes_not_nodes, _AE, "render"),
    "BATCH_RUN(5)": (batch_run_not_nodes, _AE, "render"),
    "BATCH_RUN(middleware=5)": (batch_run_middleware_not_callable, "AssertionError", "run"),
    "NATIVE_IF(5, body)": (native_if_condition_not_a_node, _TE, "render"),
    "NATIVE_IF(cond, 5)": (native_if_body_not_a_node, _TE, "render"),
    "NATIVE_WHILE(5)": (native_while_condition_not_a_node, _TE, "render"),
    "NATIVE_DO(5)": (native_do_body_not_a_node, _TE, "render"),
    "TRIGGER_EVENT('x')": (trigger_event_of_a_non_event, _AE, "same"),
    "TRIGGER_EVENT(class without constructor)": (trigger_event_of_a_class_without_constructor, _AE, "same"),
    "TRIGGER_EVENT constructor gives 5": (trigger_event_constructor_gives_a_non_event, _TE, "run"),
    "FUN_BLOCK(5)": (fun_block_of_a_non_graph, _AE, "run"),
    "FUN_BLOCK(middleware=5)": (fun_block_middleware_not_callable, "AssertionError", "run"),
    "FUN_BLOCK(object_io=5)": (fun_block_object_io_not_a_stream, _AE, "run"),
    "INT(if_state=5)": (int_if_state_not_a_bool, _TE, "run"),
    # events, debugger, streams
    "on_event(5)": (on_event_type_not_a_string, _TE, "same"),
    "on_event(priority='x')": (on_event_priority_not_an_int, _TE, "same"),
    "MatcherFactory.trigger_event(5)": (trigger_event_call_of_a_non_event, _AE, "run"),
    "where(5)": (debugger_command_of_a_non_interpreter, _AE, "same"),
    "resolve_dis(5)": (resolve_dis_of_a_non_node, _AE, "same"),
    "resolve_cmt(5)": (resolve_cmt_of_a_non_node, _AE, "same"),
    "SuspendObjectStream(queue_size=-1)": (stream_queue_size_negative, _VE, "same"),
    "SuspendObjectStream(queue_size='x')": (stream_queue_size_not_a_number, _VE, "same"),
    "SuspendObjectStream(queue_timeout='x')": (stream_queue_timeout_not_a_number, _TE, "run"),
    "SuspendObjectStream(callback=5)": (stream_callback_not_callable, _TE, "run"),
    "wait_to_suspend(timeout='x')": (wait_to_suspend_timeout_not_a_number, _TE, "same"),
}
"""case -> (trigger, the type 1.1.3 raises, where: "same" (at the bad input) or the later stage)."""

ACCEPTED: dict[str, tuple[Callable[[], None], str]] = {
    "Node(tag=5)": (node_tag_not_a_string, _TE),
    "_panic_exc = 5": (field_panic_exc, _TE),
    "_flags = 1 << 10": (field_flags_unknown_bits, _VE),
    "PointerVector(0)": (pointer_of_zero, _TE),  # 1.1.3: silently [0]
    "ALIAS(node, 5)": (alias_name_not_a_string, _TE),
    "PUSH_RET(1.5)": (push_ret_target_a_float, _TE),
    "FN(5, body)": (fn_name_not_a_string, _TE),
    "INTER_FN(5, body)": (inter_fn_name_not_a_string, _TE),
    "THEN(None)": (then_none, _TE),
    "FUN_BLOCK(None)": (fun_block_of_none, _TE),  # 1.1.3: forks the parent's graph, waits for itself
    "disassemble(around=-1)": (disassemble_around_negative, _VE),
    "break_at_addr(5)": (breakpoint_address_not_an_address, _TE),
    "break_at_tag(5)": (breakpoint_tag_not_a_string, _TE),
    "break_at_tag(condition=5)": (breakpoint_condition_not_callable, _TE),
    "LifecycleScope('bogus')": (lifecycle_scope_unknown_name, _VE),
    "wait_to_suspend(5)": (wait_to_suspend_tag_not_a_string, _TE),  # 1.1.3: never matches, waits forever
}
"""case -> (trigger, our type): inputs 1.1.3 accepts (it raises nothing, or waits forever: `Hung`)."""

DIFFERENT: dict[str, tuple[Callable[[], None], str, str]] = {
    # 1.1.3 calls slot [0], the calling node itself, again and again
    "call_sub(None)": (call_sub_none, "RecursionError", _TE),
}
"""case -> (trigger, 1.1.3's type, ours): where we do not raise 1.1.3's type, by decision."""


def outcome(trigger: Callable[[], None]) -> tuple[BaseException | None, str]:
    """(what `trigger` raised or None, the stage it raised at)."""
    _at("input")
    try:
        trigger()
    except BaseException as exc:  # noqa: BLE001 - every case's exception is the data
        return exc, STAGE[0]
    return None, STAGE[0]


def describe(trigger: Callable[[], None]) -> str:
    exc, stage = outcome(trigger)
    if exc is None:
        return "nothing"
    bases = ",".join(k.__name__ for k in type(exc).__mro__[1:-2])
    return f"{type(exc).__name__}({bases}) at {stage}: {str(exc)[:120]}"


def _every_trigger() -> dict[str, Callable[[], None]]:
    module = sys.modules[__name__]
    skip = {"outcome", "describe", "mismatches"}
    return {
        name: value
        for name, value in vars(module).items()
        if callable(value)
        and not name.startswith("_")
        and not isinstance(value, type)
        and getattr(value, "__module__", None) == __name__
        and name not in skip
    }


def mismatches() -> list[str]:
    """One line per case whose outcome here is not what the table says 1.1.3 does."""
    lines = []
    for name, (trigger, kind, where) in CASES.items():
        exc, stage = outcome(trigger)
        got = type(exc).__name__ if exc is not None else "nothing"
        if got != kind or (stage == "input" and where != "same") or (stage != "input" and where != stage):
            lines.append(f"{name}: expected {kind} at {where}, got {describe(trigger)}")
    for name, (trigger, _) in ACCEPTED.items():
        exc, _ = outcome(trigger)
        if exc is not None and not isinstance(exc, Hung):
            lines.append(f"{name}: expected nothing (or a hang), got {describe(trigger)}")
    for name, (trigger, kind, _) in DIFFERENT.items():
        exc, _ = outcome(trigger)
        if type(exc).__name__ != kind:
            lines.append(f"{name}: expected {kind}, got {describe(trigger)}")
    return lines


if __name__ == "__main__":
    if "--dump" in sys.argv:
        for case_name, case_trigger in _every_trigger().items():
            print(f"{case_name}: {describe(case_trigger)}")
        sys.exit(0)
    bad = mismatches()
    print("\n".join(bad) or f"all {len(CASES) + len(ACCEPTED) + len(DIFFERENT)} cases match")
    sys.exit(1 if bad else 0)
