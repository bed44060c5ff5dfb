"""The GDB-style listing: layout, windows, colour, mnemonic rules and every built-in instruction."""

from __future__ import annotations

import importlib
import io
import textwrap
from dataclasses import dataclass

import pytest

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.debugger import code_disp, dis, disassemble
from amrita_sense.debugger.code_disp import _color_enabled, _walk, resolve_cmt, resolve_dis
from amrita_sense.node.core import BaseNode


@pytest.fixture(autouse=True)
def plain_text(monkeypatch):
    monkeypatch.setattr(code_disp, "COLOR", False)


def need(module: str):
    """Import an instruction module, or skip the test while it does not exist yet."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            pytest.skip(f"{module} does not exist yet")
        raise


def tagged(tag: str, result=None):
    @Node(tag=tag, wrap_to_async=False)
    def node():
        return result

    return node


A, B = tagged("a"), tagged("b")
C = tagged("c", True)


def listing(graph_or_compose, *, around=None, pointer=None) -> str:
    graph = graph_or_compose.render() if hasattr(graph_or_compose, "render") else graph_or_compose
    interp = WorkflowInterpreter(graph)
    if pointer is not None:
        interp._pointer.base_addr = pointer
    return disassemble(interp, around=around)


def expect(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def source_loc(func) -> str:
    code = func.__code__
    return f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno}"


@Node()
def plain_step():
    return None


# ----- layout ---------------------------------------------------------------------------


def test_plain_nodes_nested_segments_aliases_and_an_empty_segment():
    alias = need("amrita_sense.instructions.alias")
    graph = plain_step >> (B >> (tagged("__GAMMA__") >> plain_step)) >> alias.ALIAS(B, "bb") >> NodeCompose() >> C
    loc = source_loc(plain_step.func)
    assert listing(graph) == expect(f"""
        segment [root]:
        =>[0]      plain_step; {loc}
          [1]      *segment [1]
          [2] (bb) ALIAS bb; alias for b
          [3]      *segment [3]
          [4]      c; c

        segment [1]:
          [1, 0] b; b
          [1, 1] *segment [1, 1]

        segment [1, 1]:
          [1, 1, 0] GAMMA; __GAMMA__
          [1, 1, 1] plain_step; {loc}

        segment [3]:
        """)


def test_pointer_inside_a_segment_marks_the_segment_references():
    graph = A >> (B >> (C >> A)) >> B
    assert listing(graph, pointer=[1, 1, 0]) == expect("""
        segment [root]:
          [0] a; a
        =>[1] *segment [1]
          [2] b; b

        segment [1]:
          [1, 0] b; b
        =>[1, 1] *segment [1, 1]

        segment [1, 1]:
        =>[1, 1, 0] c; c
          [1, 1, 1] a; a
        """)


def test_window_around_the_program_counter():
    graph = A >> (B >> (C >> A)) >> B
    assert listing(graph, around=1, pointer=[1, 1, 0]) == expect("""
          ...
        segment [1]:
          [1, 0]    b; b

        segment [1, 1]:
        =>[1, 1, 0] c; c
          [1, 1, 1] a; a
        """)
    assert listing(graph, around=0, pointer=[1, 1, 1]) == expect("""
          ...
        segment [1, 1]:
        =>[1, 1, 1] a; a
        """)


def test_window_at_the_start_has_no_ellipsis():
    assert listing(A >> B >> C >> A, around=1) == expect("""
        segment [root]:
        =>[0] a; a
          [1] b; b
        """)


def test_window_after_the_end_of_the_workflow():
    graph = A >> (B >> C)
    assert listing(graph, around=1, pointer=[]) == expect("""
          ...
        segment [1]:
          [1, 1] c; c
        => <end of workflow>
        """)


def test_window_with_the_pointer_on_a_segment_centres_on_its_first_node():
    graph = A >> (B >> C) >> A
    assert listing(graph, around=1, pointer=[1]) == expect("""
        segment [root]:
          [0]    a; a

        segment [1]:
        =>[1, 0] b; b
          [1, 1] c; c
        """)


def test_dis_prints_a_five_slot_window_by_default(capsys):
    interp = WorkflowInterpreter(NodeCompose(*[tagged(f"n{i}") for i in range(12)]).render())
    interp._pointer.base_addr = [6]
    dis(interp)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["  ...", "segment [root]:"]
    assert lines[2] == "  [1]  n1; n1"
    assert lines[7] == "=>[6]  n6; n6"
    assert lines[-1] == "  [11] n11; n11"
    dis(interp, around=None)
    assert capsys.readouterr().out.splitlines()[0] == "segment [root]:"


def test_around_must_be_a_non_negative_int():
    interp = WorkflowInterpreter((A >> B).render())
    for bad in (-1, 1.5, "2", True):
        with pytest.raises(ValueError):
            disassemble(interp, around=bad)


def test_listing_follows_a_hot_swapped_slot():
    from amrita_sense.node import DLLCompose

    dll = DLLCompose(NodeCompose(A, B))
    interp = WorkflowInterpreter((C >> dll).render())
    assert disassemble(interp).splitlines()[-3:] == ["segment [1] <DLLComposeProxy>:", "  [1, 0] a; a", "  [1, 1] b; b"]
    dll.apply(NodeCompose(B))
    assert disassemble(interp).splitlines()[-2:] == ["segment [1] <DLLComposeProxy>:", "  [1, 0] b; b"]


# ----- containers that are not plain --------------------------------------------------


@dataclass
class ForeignGraph:
    """A rendered graph outside the package, honouring only the indexing contract."""

    items: list
    broken: bool = False
    __rendered_compose__ = True

    def __len__(self):
        if self.broken:
            raise RuntimeError("not built")
        return len(self.items)

    def __getitem__(self, index):
        return self.items[index]

    def __bool__(self):
        return True


def test_walk_reports_blocks_leaves_and_unreadable_containers():
    graph = ForeignGraph([A, ForeignGraph([B], broken=True), ForeignGraph([C, 42])])
    walk = _walk(graph)
    assert [(block.addr, block.kind, block.readable) for block in walk.blocks] == [
        ([], "ForeignGraph", True),
        ([1], "ForeignGraph", False),
        ([2], "ForeignGraph", True),
    ]
    assert walk.leaves == [([0], 0), ([2, 0], 2)]


def test_foreign_containers_opaque_entries_and_unreadable_blocks_are_listed():
    class Holder:
        def get_graph(self):
            return ForeignGraph([A, ForeignGraph([B], broken=True), ForeignGraph([C, 42])])

        _pointer = [2, 0]

    class Pointer(list):
        @property
        def base_addr(self):
            return list(self)

    holder = Holder()
    holder._pointer = Pointer([2, 0])
    assert disassemble(holder) == expect("""
        segment [root] <ForeignGraph>:
          [0] a; a
          [1] *segment [1]
        =>[2] *segment [2]

        segment [1] <ForeignGraph> (unreadable):
          <unbuilt container>

        segment [2] <ForeignGraph>:
        =>[2, 0] c; c
          [2, 1] <opaque>
        """)


def test_empty_graph():
    class Holder:
        def get_graph(self):
            return ForeignGraph([NodeCompose()])

    holder = Holder()
    holder._pointer = []
    assert disassemble(holder) == "(empty graph)"


# ----- colour ---------------------------------------------------------------------------


class FakeStream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self._tty = tty

    def isatty(self):
        return self._tty


def test_color_follows_the_terminal_unless_forced(monkeypatch):
    monkeypatch.setattr(code_disp, "COLOR", None)
    monkeypatch.setattr("sys.stdout", FakeStream(tty=True))
    assert _color_enabled() is True
    monkeypatch.setattr("sys.stdout", FakeStream(tty=False))
    assert _color_enabled() is False
    monkeypatch.setattr(code_disp, "COLOR", True)
    assert _color_enabled() is True
    monkeypatch.setattr("sys.stdout", FakeStream(tty=True))
    monkeypatch.setattr(code_disp, "COLOR", False)
    assert _color_enabled() is False


def test_piped_output_has_no_escape_codes(monkeypatch, capsys):
    monkeypatch.setattr(code_disp, "COLOR", None)
    dis(WorkflowInterpreter((A >> (B >> C)).render()), around=None)
    assert "\x1b" not in capsys.readouterr().out


def test_colour_codes_wrap_each_part_without_shifting_columns(monkeypatch):
    jump = need("amrita_sense.instructions.jump")
    alias = need("amrita_sense.instructions.alias")
    monkeypatch.setattr(code_disp, "COLOR", True)
    graph = (alias.ALIAS(A, "x") >> (B >> jump.JMP("x")) >> B).render()
    text = listing(graph, pointer=[1, 0])
    seg, addr, pc, bright, dim, yellow, green, reset = (
        "\x1b[1m\x1b[35m",
        "\x1b[36m",
        "\x1b[1m\x1b[32m",
        "\x1b[1m",
        "\x1b[2m",
        "\x1b[33m",
        "\x1b[32m",
        "\x1b[0m",
    )
    assert text.splitlines() == [
        f"{seg}segment{reset} {bright}[root]{reset}:",
        f"  {addr}[0]{reset} {green}(x){reset} {bright}ALIAS{reset} {yellow}x{reset}{dim}; {reset}{dim}alias for a{reset}",
        f"{pc}=>{reset}{addr}[1]{reset}     {addr}*segment [1]{reset}",
        f"  {addr}[2]{reset}     {bright}b{reset}{dim}; {reset}{dim}b{reset}",
        "",
        f"{seg}segment{reset} {addr}[1]{reset}:",
        f"{pc}=>{reset}{addr}[1, 0]{reset} {bright}b{reset}{dim}; {reset}{dim}b{reset}",
        f"  {addr}[1, 1]{reset} {bright}JMP{reset} {yellow}[0]{reset}{dim}; {reset}{dim}JMP 'x'{reset}",
    ]
    window = listing(graph, around=1, pointer=[])
    assert window.splitlines() == [
        f"{dim}  ...{reset}",
        f"{seg}segment{reset} {bright}[root]{reset}:",
        f"  {addr}[2]{reset} {bright}b{reset}{dim}; {reset}{dim}b{reset}",
        f"{yellow}=> <end of workflow>{reset}",
    ]


def test_display_constants_have_the_reference_values():
    assert (code_disp.DIS_ATTR, code_disp.CMT_ATTR) == ("__sdb_dis__", "__sdb_cmt__")
    assert (code_disp.AUTO_DIS, code_disp.DEFAULT_WINDOW) == (True, 5)
    assert {
        name: getattr(code_disp, name)
        for name in (
            "C_PC",
            "C_ADDR",
            "C_ALIAS",
            "C_MNEMONIC",
            "C_OPERAND",
            "C_COMMENT",
            "C_SEGMENT",
            "C_REF",
            "C_CLASS",
            "C_NOTE",
            "C_ANOMALY",
        )
    } == {
        "C_PC": "\x1b[1m\x1b[32m",
        "C_ADDR": "\x1b[36m",
        "C_ALIAS": "\x1b[32m",
        "C_MNEMONIC": "\x1b[1m",
        "C_OPERAND": "\x1b[33m",
        "C_COMMENT": "\x1b[2m",
        "C_SEGMENT": "\x1b[1m\x1b[35m",
        "C_REF": "\x1b[36m",
        "C_CLASS": "\x1b[34m",
        "C_NOTE": "\x1b[33m",
        "C_ANOMALY": "\x1b[31m",
    }


# ----- what a node says about itself ----------------------------------------------------


class Custom(BaseNode):
    def __init__(self, func, tag=None):
        self._init(func, tag, False, True)

    def __call__(self):
        return self.func()


def helper():
    return None


def test_mnemonic_and_comment_from_class_attributes():
    class Fixed(Custom):
        __sdb_dis__ = "FIX 1"
        __sdb_cmt__ = "fixed"

    node = Fixed(helper)
    assert (resolve_dis(node), resolve_cmt(node)) == ("FIX 1", "fixed")


def test_mnemonic_and_comment_from_properties_and_instance_attributes():
    class Computed(Custom):
        @property
        def __sdb_dis__(self):
            return f"GO {self.tag}"

    node = Computed(helper, tag="there")
    node.__sdb_cmt__ = "set on the instance"
    assert (resolve_dis(node), resolve_cmt(node)) == ("GO there", "set on the instance")


def test_missing_values_are_derived_from_tag_and_function():
    auto = Custom(helper)
    assert auto.tag == "NodeSuspend::helper"
    assert (resolve_dis(auto), resolve_cmt(auto)) == ("helper", source_loc(helper))
    decorated = Custom(helper, tag="__MY_OP__")
    assert (resolve_dis(decorated), resolve_cmt(decorated)) == ("MY_OP", "__MY_OP__")
    explicit = Custom(helper, tag="Plain::tag")
    assert (resolve_dis(explicit), resolve_cmt(explicit)) == ("Plain::tag", "Plain::tag")


def test_underscored_function_names_lose_the_underscores():
    def _private_step():
        return None

    def ___():
        return None

    assert resolve_dis(Custom(_private_step)) == "private_step"
    assert resolve_dis(Custom(___)) == "NodeSuspend::___"


def test_none_empty_non_string_and_failing_values_fall_back():
    class Odd(Custom):
        __sdb_dis__ = ""

        @property
        def __sdb_cmt__(self):
            raise RuntimeError("broken display property")

    class Numeric(Custom):
        __sdb_dis__ = 42
        __sdb_cmt__ = None

    for node in (Odd(helper, tag="t"), Numeric(helper, tag="t")):
        assert (resolve_dis(node), resolve_cmt(node)) == ("t", "t")


def test_callable_without_code_object_uses_its_name():
    class Callable:
        __qualname__ = "Callable"

        def __call__(self):
            return None

    node = Custom(Callable())
    assert resolve_cmt(node) == "Callable"


# ----- built-in instructions -------------------------------------------------------------


def test_nop_reset_suspend():
    ctrl = need("amrita_sense.instructions.workfl_ctrl")
    assert listing(A >> ctrl.NOP >> ctrl.RESET >> ctrl.SUSPEND) == expect("""
        segment [root]:
        =>[0] a; a
          [1] NOP; no operation
          [2] RESET; reset interpreter state
          [3] SUSPEND; suspend, keep context
        """)


def test_jmp_to_alias_and_to_address():
    jump = need("amrita_sense.instructions.jump")
    alias = need("amrita_sense.instructions.alias")
    assert listing(alias.ALIAS(A, "x") >> B >> jump.JMP("x")) == expect("""
        segment [root]:
        =>[0] (x) ALIAS x; alias for a
          [1]     b; b
          [2]     JMP [0]; JMP 'x'
        """)
    assert listing(A >> B >> jump.JMP([0])).splitlines()[-1] == "  [2] JMP [0]; JMP [0]"


def test_if_elif_else():
    if_clause = need("amrita_sense.instructions.if_clause")
    assert listing(A >> if_clause.IF(C, B)) == expect("""
        segment [root]:
        =>[0] a; a
          [1] *segment [1]

        segment [1]:
          [1, 0] JMPIF then=#3 else=+3; ConditionJumpNode
          [1, 1] c; c
          [1, 2] b; b
          [1, 3] NOP; no operation
        """)
    assert listing(A >> if_clause.IF(C, B).ELSE(A)).splitlines()[-3:] == [
        "  [1, 3] ELSE do=+1 then=+2; ELSENode",
        "  [1, 4] a; a",
        "  [1, 5] NOP; no operation",
    ]


def test_if_elif_else_chain_text():
    if_clause = need("amrita_sense.instructions.if_clause")
    body = listing(A >> if_clause.IF(C, B).ELIF(C, A).ELSE(B)).split("segment [1]:\n")[1]
    assert body.splitlines() == [
        "  [1, 0] JMPIF then=#8 else=+3; ConditionJumpNode",
        "  [1, 1] c; c",
        "  [1, 2] b; b",
        "  [1, 3] JMPIF then=#8 else=+3; ConditionJumpNode",
        "  [1, 4] c; c",
        "  [1, 5] a; a",
        "  [1, 6] ELSE do=+1 then=+2; ELSENode",
        "  [1, 7] b; b",
        "  [1, 8] NOP; no operation",
    ]


def test_while_and_do_while():
    while_clause = need("amrita_sense.instructions.loop.while_clause")
    do_while = need("amrita_sense.instructions.loop.do_while")
    assert listing(A >> while_clause.WHILE(C).ACTION(B)).split("segment [1]:\n")[1].splitlines() == [
        "  [1, 0] WHILE checkup=#3 else=#4; WhileNode",
        "  [1, 1] c; c",
        "  [1, 2] b; b",
        "  [1, 3] WHILE.CHECK back=#0; CheckUpNode",
        "  [1, 4] NOP; no operation",
    ]
    assert listing(A >> do_while.DO(B).WHILE(C)).split("segment [1]:\n")[1].splitlines() == [
        "  [1, 0] DO loop=#2 break=#4; DONode",
        "  [1, 1] b; b",
        "  [1, 2] DO.CHECK back=#0 exit=#4; DowhileNode",
        "  [1, 3] c; c",
        "  [1, 4] NOP; no operation",
    ]


def test_try_catch_then_finally():
    try_catch = need("amrita_sense.instructions.try_catch")
    clause = try_catch.Try(A).CATCH(ValueError, B).THEN(A).FINALLY(B)
    assert listing(A >> clause).split("segment [1]:\n")[1].splitlines() == [
        "  [1, 0] TRY catch=ValueError#2; else=#3 finally=#4 escape=#5",
        "  [1, 1] a; a",
        "  [1, 2] b; b",
        "  [1, 3] a; a",
        "  [1, 4] b; b",
        "  [1, 5] NOP; no operation",
    ]


def test_call_ret_push_ret():
    ret2 = need("amrita_sense.instructions.ret2")
    alias = need("amrita_sense.instructions.alias")
    graph = alias.ALIAS(A, "f") >> ret2.CALL("f") >> ret2.RET() >> ret2.PUSH_RET("f") >> ret2.CALL([0], from_adr=[1])
    assert listing(graph) == expect("""
        segment [root]:
        =>[0] (f) ALIAS f; alias for a
          [1]     CALL [0], ret=?; push return address and jump
          [2]     RET; return from subroutine
          [3]     PUSH [0]; push return address
          [4]     CALL [0], ret=[1]; push return address and jump
        """)


def test_invoke_and_archived_nodes():
    sub = need("amrita_sense.instructions.subprogram")
    alias = need("amrita_sense.instructions.alias")
    assert listing(alias.ALIAS(A, "f") >> sub.INVOKE("f") >> sub.ARCHIVED_NODES(A, B)) == expect("""
        segment [root]:
        =>[0] (f) ALIAS f; alias for a
          [1]     INVOKE f -> [0]; InvokeNode
          [2]     *segment [2]

        segment [2]:
          [2, 0] JMP.NEAR #3; SubprogramJumpNode
          [2, 1] a; a
          [2, 2] b; b
          [2, 3] NOP; no operation
        """)


def test_archived_segment():
    sub = need("amrita_sense.instructions.subprogram")
    assert listing(A >> sub.ARCHIVED_SEGMENT(NodeCompose(A, B))) == expect("""
        segment [root]:
        =>[0] a; a
          [1] *segment [1]

        segment [1]:
          [1, 0] ARCHIVED_SEGMENT; BuiltinTags.ARCHIVED_SEGMENT
          [1, 1] *segment [1, 1]
          [1, 2] NOP; no operation

        segment [1, 1]:
          [1, 1, 0] a; a
          [1, 1, 1] b; b
        """)


def test_context_and_interrupt_instructions():
    interrupt = need("amrita_sense.instructions.interrupt")
    alias = need("amrita_sense.instructions.alias")
    graph = (
        alias.ALIAS(A, "f")
        >> interrupt.PUSH_CONTEXT("f")
        >> interrupt.POP_CONTEXT()
        >> interrupt.INT("f")
        >> interrupt.INT("f", [0], True)
        >> interrupt.IRET()
    )
    assert listing(graph) == expect("""
        segment [root]:
        =>[0] (f) ALIAS f; alias for a
          [1]     PUSHCTX [0]; BuiltinTags.PUSH_CONTEXT
          [2]     POP_CONTEXT; BuiltinTags.POP_CONTEXT
          [3]     INT [0], ret=?; save context and jump
          [4]     INT [0], ret=[0]; save context and jump
          [5]     IRET; return from interrupt
        """)


@pytest.mark.parametrize(
    ("factory", "name", "caller", "closer"),
    [
        ("FN", "fn", "CALL [1, 1], ret=?; push return address and jump", "RET; return from subroutine"),
        ("INTER_FN", "isr", "INT [1, 1], ret=?; save context and jump", "IRET; return from interrupt"),
    ],
)
def test_fn_and_inter_fn(factory, name, caller, closer):
    func_block = need("amrita_sense.instructions.func_block")
    ret2 = need("amrita_sense.instructions.ret2")
    interrupt = need("amrita_sense.instructions.interrupt")
    call = ret2.CALL(name) if factory == "FN" else interrupt.INT(name)
    graph = (A >> getattr(func_block, factory)(name, NodeCompose(A, B)) >> call).render()
    escape = source_loc(graph[1][0].func)
    pad = " " * (len(name) + 3)
    assert listing(graph) == expect(f"""
        segment [root]:
        =>[0] a; a
          [1] *segment [1]
          [2] {caller}

        segment [1]:
          [1, 0] {pad}fn_escape; {escape}
          [1, 1] ({name}) ALIAS {name}; alias for NodeSuspend::_no_operation
          [1, 2] {pad}*segment [1, 2]
          [1, 3] {pad}{closer}

        segment [1, 2]:
          [1, 2, 0] a; a
          [1, 2, 1] b; b
        """)


def test_fun_block_and_batch_run():
    func_block = need("amrita_sense.instructions.func_block")
    batch = need("amrita_sense.instructions.batch")
    assert listing(A >> func_block.FUN_BLOCK((A >> B).render())).splitlines()[-1] == "  [1] FN; FuncBlock"
    assert listing(A >> batch.BATCH_RUN(A, B >> A)).splitlines()[-1] == "  [1] BATCH 2; BuiltinTags.BATCH_RUN"


def test_trigger_event():
    trigger = need("amrita_sense.instructions.trigger_event")
    event = need("amrita_sense.hook.event")

    @dataclass
    class Ping(event.ConstructableEvent[str]):
        def get_event_type(self):
            return "ping"

        @property
        def event_type(self):
            return "ping"

        @classmethod
        def constructor(cls):
            return cls()

    assert listing(A >> trigger.TRIGGER_EVENT(Ping)).split("segment [1]:\n")[1].splitlines() == [
        "  [1, 0] EVENT; EventTrigger",
        "  [1, 1] BuiltinTags.TRIGGER_CONSTRUCTOR; BuiltinTags.TRIGGER_CONSTRUCTOR",
        "  [1, 2] NOP; no operation",
    ]


def test_native_if_with_single_node_branches():
    native = need("amrita_sense.instructions.native")
    assert listing(A >> native.NATIVE_IF(C, B)).split("segment [1]:\n")[1].splitlines() == [
        "  [1, 0] NJMPIF do=#2 ret=#4 false=#4; NativeIfJumpNode",
        "  [1, 1] c; c",
        "  [1, 2] b; b",
        "  [1, 3] NOP; no operation",
        "  [1, 4] NOP; no operation",
    ]
    chained = native.NATIVE_IF(C, A).ELIF(C, B).ELSE(A)
    assert listing(A >> chained).split("segment [1]:\n")[1].splitlines() == [
        "  [1, 0] NJMPIF do=#2 ret=#7 false=#3; NativeIfJumpNode",
        "  [1, 1] c; c",
        "  [1, 2] a; a",
        "  [1, 3] NJMPIF do=#5 ret=#7 false=#6; NativeIfJumpNode",
        "  [1, 4] c; c",
        "  [1, 5] b; b",
        "  [1, 6] a; a",
        "  [1, 7] NOP; no operation",
    ]


def test_native_while_with_break_and_continue():
    native = need("amrita_sense.instructions.native")
    body = NodeCompose(A, native.BREAK_LOOP(), native.CONTINUE())
    assert listing(A >> native.NATIVE_WHILE(C).ACTION(body)) == expect("""
        segment [root]:
        =>[0] a; a
          [1] *segment [1]

        segment [1]:
          [1, 0] NWHILE body=#2 self=#0 exit=#3; NativeWhileNode
          [1, 1] c; c
          [1, 2] *segment [1, 2]
          [1, 3] NOP; no operation

        segment [1, 2]:
          [1, 2, 0] a; a
          [1, 2, 1] BREAK_LOOP; BuiltinTags.BREAK_LOOP
          [1, 2, 2] CONTINUE; BuiltinTags.CONTINUE
          [1, 2, 3] CONTINUE; BuiltinTags.CONTINUE
        """)


def test_native_do():
    native = need("amrita_sense.instructions.native")
    assert listing(A >> native.NATIVE_DO(A >> B).WHILE(C)) == expect("""
        segment [root]:
        =>[0] a; a
          [1] *segment [1]

        segment [1]:
          [1, 0] NENTER body=#1; NativeBubbleEnterNode push=True
          [1, 1] *segment [1, 1]
          [1, 2] NDO.CHECK loop=#0 exit=#4; NativeDoWhileNode
          [1, 3] c; c
          [1, 4] NOP; no operation

        segment [1, 1]:
          [1, 1, 0] a; a
          [1, 1, 1] b; b
          [1, 1, 2] CONTINUE; BuiltinTags.CONTINUE
        """)
