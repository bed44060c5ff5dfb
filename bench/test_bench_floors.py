"""pytest-benchmark versions of the plain-Python floors (the same bodies without the engine)."""


def test_floor_call(bench_scenario):
    bench_scenario("floor_call")


def test_floor_await(bench_scenario):
    bench_scenario("floor_await")


def test_floor_to_thread(bench_scenario):
    bench_scenario("floor_to_thread")


def test_floor_call_kw2(bench_scenario):
    bench_scenario("floor_call_kw2")


def test_floor_factories(bench_scenario):
    bench_scenario("floor_factories")


def test_floor_while(bench_scenario):
    bench_scenario("floor_while")


def test_floor_if(bench_scenario):
    bench_scenario("floor_if")


def test_floor_jmp(bench_scenario):
    bench_scenario("floor_jmp")


def test_floor_try(bench_scenario):
    bench_scenario("floor_try")


def test_floor_pingpong(bench_scenario):
    bench_scenario("floor_pingpong")


def test_floor_pingpong_future(bench_scenario):
    bench_scenario("floor_pingpong_future")


def test_floor_gather(bench_scenario):
    bench_scenario("floor_gather")


def test_floor_per_request(bench_scenario):
    bench_scenario("floor_per_request")


def test_floor_per_request_depends(bench_scenario):
    bench_scenario("floor_per_request_depends")


def test_floor_try_request(bench_scenario):
    bench_scenario("floor_try_request")


def test_floor_event_request(bench_scenario):
    bench_scenario("floor_event_request")


def test_floor_thread_request(bench_scenario):
    bench_scenario("floor_thread_request")
