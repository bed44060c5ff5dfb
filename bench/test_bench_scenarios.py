"""pytest-benchmark versions of the scenarios: one function per scenario (see bench/conftest.py).

Inputs are built outside the timed body, every round is count-checked, and a
scenario whose feature the build lacks is skipped with the reason.
"""


def test_sync_chain(bench_scenario):
    bench_scenario("sync_chain")


def test_async_chain(bench_scenario):
    bench_scenario("async_chain")


def test_thread_chain(bench_scenario):
    bench_scenario("thread_chain")


def test_nested(bench_scenario):
    bench_scenario("nested")


def test_while_loop(bench_scenario):
    bench_scenario("while_loop")


def test_if_elif_else(bench_scenario):
    bench_scenario("if_elif_else")


def test_jmp_loop(bench_scenario):
    bench_scenario("jmp_loop")


def test_call_ret(bench_scenario):
    bench_scenario("call_ret")


def test_try_catch(bench_scenario):
    bench_scenario("try_catch")


def test_render(bench_scenario):
    bench_scenario("render")


def test_decorate(bench_scenario):
    bench_scenario("decorate")


def test_memory(bench_scenario):
    bench_scenario("memory")


def test_suspend_resume(bench_scenario):
    bench_scenario("suspend_resume")


def test_interrupt_inject(bench_scenario):
    bench_scenario("interrupt_inject")


def test_event_dispatch(bench_scenario):
    bench_scenario("event_dispatch")


def test_di_types(bench_scenario):
    bench_scenario("di_types")


def test_di_names(bench_scenario):
    bench_scenario("di_names")


def test_di_depends(bench_scenario):
    bench_scenario("di_depends")


def test_di_depends_cached(bench_scenario):
    bench_scenario("di_depends_cached")


def test_interp_construct(bench_scenario):
    bench_scenario("interp_construct")


def test_concurrent(bench_scenario):
    bench_scenario("concurrent")


def test_per_request(bench_scenario):
    bench_scenario("per_request")


def test_per_request_first(bench_scenario):
    bench_scenario("per_request_first")


def test_per_request_depends(bench_scenario):
    bench_scenario("per_request_depends")


def test_try_request(bench_scenario):
    bench_scenario("try_request")


def test_event_request(bench_scenario):
    bench_scenario("event_request")


def test_thread_request(bench_scenario):
    bench_scenario("thread_request")


def test_peer_chain(bench_scenario):
    bench_scenario("peer_chain")


def test_peer_agent(bench_scenario):
    bench_scenario("peer_agent")


def test_peer_if_else(bench_scenario):
    bench_scenario("peer_if_else")


# Near variants (`--families`)


def test_try_exc_val(bench_scenario):
    bench_scenario("try_exc_val")


def test_try_exc_type(bench_scenario):
    bench_scenario("try_exc_type")


def test_try_exc_both(bench_scenario):
    bench_scenario("try_exc_both")


def test_try_exc_contexts(bench_scenario):
    bench_scenario("try_exc_contexts")


def test_try_in_while(bench_scenario):
    bench_scenario("try_in_while")


def test_try_in_do(bench_scenario):
    bench_scenario("try_in_do")


def test_try_in_native_if(bench_scenario):
    bench_scenario("try_in_native_if")


def test_try_in_call(bench_scenario):
    bench_scenario("try_in_call")


def test_event_plain(bench_scenario):
    bench_scenario("event_plain")


def test_event_generic(bench_scenario):
    bench_scenario("event_generic")


def test_event_generic_dataclass(bench_scenario):
    bench_scenario("event_generic_dataclass")


def test_event_matcher(bench_scenario):
    bench_scenario("event_matcher")


def test_event_contexts(bench_scenario):
    bench_scenario("event_contexts")


def test_loop_do(bench_scenario):
    bench_scenario("loop_do")


def test_loop_native_while(bench_scenario):
    bench_scenario("loop_native_while")


def test_loop_native_do(bench_scenario):
    bench_scenario("loop_native_do")


def test_loop_goto(bench_scenario):
    bench_scenario("loop_goto")


def test_loop_call(bench_scenario):
    bench_scenario("loop_call")


def test_request_depends2(bench_scenario):
    bench_scenario("request_depends2")


def test_request_async(bench_scenario):
    bench_scenario("request_async")


# AmritaCore's chat turn (skipped where amrita-core is not installed)


def test_amrita_core_turn(bench_scenario):
    bench_scenario("amrita_core_turn")


def test_amrita_core_turn_inline(bench_scenario):
    bench_scenario("amrita_core_turn_inline")
