"""Asking the client mid-call (ctx.ask / elicit / sample / list_roots).

On 2026-07-28 the kernel answers with an InputRequiredResult and resumes when
the client retries (SEP-2322); on 2025-11-25 it sends the requests mid-call.
Everything here goes through a real SDK Client (in memory, or HTTP against
`plexor serve`), with the SDK's own retry driver on the client side.
"""

from __future__ import annotations

import base64
import re
import stat
from typing import Any, Literal

import mcp_types as types
import pytest
from conformance.serving import modern_post, serve_http
from mcp.shared.exceptions import MCPError

from plexor import AskError, Context, Elicit, ListRoots, PlexorError, Sample, hookimpl

pytestmark = pytest.mark.anyio

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


class Asker:
    """A plugin whose tools, resource and prompt ask the client things."""

    PLEXOR_NAMESPACE = "ask"

    def __init__(self) -> None:
        self.runs: list[int] = []

    @hookimpl
    def plexor_register_tools(self, register, settings):
        runs = self.runs

        async def trio(ctx: Context, city: str = "Paris") -> dict:
            """Ask three things in one round."""
            runs.append(ctx.round)
            got = await ctx.ask(who=Elicit("Who?", {"name": str}), pitch=Sample(f"Sell {city}", max_tokens=20),
                                roots=ListRoots())
            return {"name": got["who"]["content"]["name"], "pitch": got["pitch"]["content"]["text"],
                    "roots": [r["uri"] for r in got["roots"]["roots"]], "round": ctx.round}

        async def two_steps(ctx: Context) -> dict:
            """Ask twice, one question a round, keeping a value minted in round 1."""
            if ctx.round == 1:
                ctx.state["ticket"] = 41
            first = await ctx.elicit("Name?", NAME, key="step1")
            ctx.state["ticket"] += 1
            second = await ctx.elicit("Colour?", {"colour": str}, key="step2")
            return {"name": first["content"]["name"], "colour": second["content"]["colour"],
                    "ticket": ctx.state["ticket"], "round": ctx.round}

        async def polite(ctx: Context) -> dict:
            """Elicit, and report what the user did."""
            got = await ctx.elicit("Name?", NAME)
            return {"action": got["action"], "content": got.get("content")}

        async def capable(ctx: Context) -> dict:
            """Say what this client can be asked."""
            return {what: ctx.can_ask(what) for what in ("elicitation", "sampling", "roots")}

        async def roots(ctx: Context) -> dict:
            """Return the client's roots."""
            return {"roots": [r["uri"] for r in await ctx.list_roots()]}

        async def grouped(ctx: Context) -> dict:
            """Ask from inside a task group."""
            import anyio

            out: dict = {}

            async def child() -> None:
                out.update(await ctx.sample("inside", max_tokens=5))

            async with anyio.create_task_group() as tg:
                tg.start_soon(child)
            return {"text": out["content"]["text"]}

        async def swallow(ctx: Context) -> dict:
            """A tool that (wrongly) catches Exception around the question."""
            try:
                got = await ctx.elicit("Name?", NAME)
            except Exception as exc:  # noqa: BLE001 - the point of the test
                return {"swallowed": type(exc).__name__}
            return {"name": got["content"]["name"]}

        async def hoard(ctx: Context) -> dict:
            """Puts something that is not JSON in ctx.state."""
            ctx.state["when"] = object()
            return await ctx.elicit("Name?", NAME)

        for func in (trio, two_steps, polite, capable, roots, grouped, swallow, hoard):
            register(func)

    @hookimpl
    def plexor_register_resources(self, register, settings):
        async def secret(ctx: Context) -> str:
            got = await ctx.elicit("Password?", {"password": str})
            return "opened" if got["content"]["password"] == "sesame" else "refused"

        register("ask://secret", secret, name="secret", mime_type="text/plain")

    @hookimpl
    def plexor_register_prompts(self, register, settings):
        async def brief(ctx: Context, topic: str) -> str:
            """A prompt that asks the user for the audience first.

            :param topic: what to brief on.
            """
            got = await ctx.elicit("Audience?", {"audience": str})
            return f"Brief {got['content']['audience']} on {topic}."

        register(brief)


class Answers:
    """Client callbacks that record each question and answer it."""

    def __init__(self, name: str = "Ann", action: str = "accept", content: dict | None = None) -> None:
        self.asked: list[str] = []
        self.name, self.action, self.content = name, action, content

    async def elicit(self, context, params):
        self.asked.append(params.message)
        if self.action != "accept":
            return types.ElicitResult(action=self.action)
        props = params.requested_schema["properties"]
        known = {"name": self.name, "colour": "teal", "color": "teal", "password": "sesame", "context": "interns",
                 "audience": "interns", "ok": True}
        content = self.content or {k: known[k] for k in props}
        return types.ElicitResult(action="accept", content=content)

    async def sample(self, context, params):
        self.asked.append(params.messages[0].content.text)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="Lovely."), model="m")

    async def roots(self, context):
        self.asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])

    def callbacks(self) -> dict:
        return {"elicitation_callback": self.elicit, "sampling_callback": self.sample, "list_roots_callback": self.roots}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_one_call_asks_three_things_in_both_eras(plexor, mode):
    plugin, answers = Asker(), Answers()
    async with plexor.client([("ask", plugin)], mode=mode, **answers.callbacks()) as client:
        r = await client.call_tool("ask_trio", {"city": "Lyon"})
        version = client.protocol_version
    assert not r.is_error, r.content
    assert r.structured_content["name"] == "Ann" and r.structured_content["pitch"] == "Lovely."
    assert r.structured_content["roots"] == ["file:///work"]
    assert sorted(answers.asked) == sorted(["Who?", "Sell Lyon", "roots"])  # each asked exactly once
    if mode == "auto":  # 2026-07-28: one InputRequiredResult round, then the rerun with the answers
        assert version == "2026-07-28"
        assert plugin.runs == [1, 2] and r.structured_content["round"] == 2
    else:  # 2025-11-25: asked mid-call, the tool runs once
        assert plugin.runs == [1] and r.structured_content["round"] == 1


async def test_multi_round_keeps_earlier_answers_and_state(plexor):
    answers = Answers()
    async with plexor.client([("ask", Asker())], mode="auto", **answers.callbacks()) as client:
        r = await client.call_tool("ask_two_steps", {})
    # The body re-runs each round and sees what the round before left: 41, +1 in round 2, +1 in round 3.
    assert r.structured_content == {"name": "Ann", "colour": "teal", "ticket": 43, "round": 3}
    assert answers.asked == ["Name?", "Colour?"]  # step1 was not asked again in round 3


async def test_request_state_is_sealed_and_bound_to_the_request(plexor):
    async with plexor.client([("ask", Asker())], mode="auto", **Answers().callbacks()) as client:
        first = await client.session.call_tool("ask_two_steps", {}, allow_input_required=True)
        assert first.result_type == "input_required" and list(first.input_requests) == ["step1"]
        state = first.request_state
        raw = base64.urlsafe_b64decode(state.removeprefix("v1.") + "=" * (-len(state) % 4))
        assert b"ticket" not in raw and b"round" not in raw  # encrypted, not merely signed or encoded
        answer = {"step1": types.ElicitResult(action="accept", content={"name": "Bo"})}
        second = await client.session.call_tool("ask_two_steps", {}, input_responses=answer, request_state=state,
                                                allow_input_required=True)
        assert list(second.input_requests) == ["step2"] and second.request_state != state
        tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
        for name, args, token in (("ask_two_steps", {}, tampered), ("ask_trio", {}, state),
                                  ("ask_trio", {"city": "Nice"}, state)):
            with pytest.raises(MCPError) as err:
                await client.session.call_tool(name, args, input_responses=answer, request_state=token, allow_input_required=True)
            assert err.value.error.code == types.INVALID_PARAMS
            assert "Invalid or expired requestState" in err.value.error.message
            assert "without requestState and inputResponses to start over" in err.value.error.message


async def test_a_missing_answer_is_asked_again_and_extra_answers_are_ignored(plexor):
    async with plexor.client([("ask", Asker())], mode="auto", **Answers().callbacks()) as client:
        wrong = {"nobody": types.ElicitResult(action="accept", content={"x": 1})}
        again = await client.session.call_tool("ask_polite", {}, input_responses=wrong, allow_input_required=True)
        assert again.result_type == "input_required" and len(again.input_requests) == 1
        key = next(iter(again.input_requests))
        extra = {key: types.ElicitResult(action="accept", content={"name": "Cy"}), **wrong}
        done = await client.session.call_tool("ask_polite", {}, input_responses=extra, request_state=again.request_state)
        assert done.structured_content == {"action": "accept", "content": {"name": "Cy"}}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_declined_and_cancelled_answers_reach_the_tool(plexor, mode):
    for action in ("decline", "cancel"):
        answers = Answers(action=action)
        async with plexor.client([("ask", Asker())], mode=mode, **answers.callbacks()) as client:
            r = await client.call_tool("ask_polite", {})
        assert r.structured_content == {"action": action, "content": None}


async def test_answers_are_checked_against_the_question(plexor):
    async with plexor.client([("ask", Asker())], mode="auto", **Answers().callbacks()) as client:
        first = await client.session.call_tool("ask_polite", {}, allow_input_required=True)
        key = next(iter(first.input_requests))
        cases = [
            ({"action": "accept", "content": {"name": 7}}, "does not match the requested schema at name"),
            ({"action": "accept", "content": {}}, "'name' is a required property"),
            ({"action": "maybe"}, "expected an ElicitResult"),
            ({"roots": []}, "action"),
        ]
        for answer, expected in cases:
            with pytest.raises(MCPError) as err:
                await _raw_call(client, "ask_polite", {key: answer}, first.request_state)
            assert err.value.error.code == types.INVALID_PARAMS
            assert f"inputResponses[{key!r}]" in err.value.error.message and expected in err.value.error.message
            assert "under the same key as the input request" in err.value.error.message


class _UncheckedCall(types.Request[dict[str, Any], Literal["tools/call"]]):
    """A tools/call whose params the client does not validate: answers a typed model would refuse."""

    method: Literal["tools/call"] = "tools/call"
    params: dict[str, Any]


async def _raw_call(client, name, responses, state):
    params = {"name": name, "arguments": {}, "inputResponses": responses, "requestState": state}
    return await client.session.send_request(_UncheckedCall(params=params), types.CallToolResult)


async def test_a_client_without_the_capability_gets_minus_32021_or_guidance(plexor):
    async with plexor.client([("ask", Asker())], mode="auto") as client:  # no callbacks: nothing declared
        r = await client.call_tool("ask_capable", {})
        assert r.structured_content == {"elicitation": False, "sampling": False, "roots": False}
        with pytest.raises(MCPError) as err:
            await client.call_tool("ask_trio", {})
        assert err.value.error.code == -32021
        assert err.value.error.data["requiredCapabilities"] in ({"elicitation": {"form": {}}}, {"sampling": {}}, {"roots": {}})
        assert "did not declare" in err.value.error.message and "Use a client that supports" in err.value.error.message
    async with plexor.client([("ask", Asker())], mode="legacy") as client:  # 2025: a tool error with the same advice
        r = await client.call_tool("ask_polite", {})
        assert r.is_error and "did not declare the elicitation capability" in r.content[0].text
    async with plexor.client([("ask", Asker())], mode="auto", **Answers().callbacks()) as client:
        r = await client.call_tool("ask_capable", {})
        assert r.structured_content == {"elicitation": True, "sampling": True, "roots": True}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_resources_and_prompts_can_ask_too(plexor, mode):
    answers = Answers()
    async with plexor.client([("ask", Asker())], mode=mode, **answers.callbacks()) as client:
        read = await client.read_resource("ask://secret")
        assert read.contents[0].text == "opened"
        prompt = await client.get_prompt("ask_brief", {"topic": "MCP"})
        assert prompt.messages[0].content.text == "Brief interns on MCP."
        assert (await client.call_tool("ask_roots", {})).structured_content == {"roots": ["file:///work"]}
    assert answers.asked == ["Password?", "Audience?", "roots"]


async def test_asking_inside_a_task_group_or_a_broad_except_still_works(plexor):
    async with plexor.client([("ask", Asker())], mode="auto", **Answers().callbacks()) as client:
        assert (await client.call_tool("ask_grouped", {})).structured_content == {"text": "Lovely."}
        # InputRequired is a BaseException: `except Exception` in a tool cannot swallow the round.
        assert (await client.call_tool("ask_swallow", {})).structured_content == {"name": "Ann"}


async def test_state_that_is_not_json_is_refused_with_guidance(plexor):
    async with plexor.client([("ask", Asker())], mode="auto", **Answers().callbacks()) as client:
        r = await client.call_tool("ask_hoard", {})
    assert r.is_error and "ctx.state cannot be carried to the next round" in r.content[0].text
    assert "Keep only JSON values in ctx.state" in r.content[0].text


async def test_a_direct_kernel_call_cannot_ask_and_says_so(plexor):
    async with plexor.kernel([("ask", Asker())]) as kernel:
        outcome = await kernel.call_tool("ask_polite", {})
    assert outcome.is_error and "no MCP client to ask" in outcome.text


def test_questions_are_checked_when_made():
    assert Elicit("Age?", {"age": int, "ok": bool}).schema == {
        "type": "object", "properties": {"age": {"type": "integer"}, "ok": {"type": "boolean"}}, "required": ["age", "ok"]}
    for bad, words in [(lambda: Elicit("", {"a": str}), "non-empty message"),
                       (lambda: Elicit("Q?", {"a": list}), "forms hold only"),
                       (lambda: Elicit("Q?", {"type": "object", "properties": {"a": {"type": "object"}}}), "must be a string"),
                       (lambda: Sample([]), "prompt string or a non-empty list"),
                       (lambda: Sample("x", max_tokens=0), "positive integer")]:
        with pytest.raises(PlexorError) as err:
            bad()
        assert words in str(err.value) and err.value.guidance
    assert issubclass(AskError, PlexorError)


# ---------------------------------------------------------------- over HTTP, on the wire

def test_http_missing_capability_is_400_and_protocol_errors_are_json_rpc_errors(tmp_path):
    with serve_http(tmp_path) as served:
        status, reply = modern_post(served, "tools/call", {"name": "test_missing_capability", "arguments": {}}, caps={},
                                name="test_missing_capability")
        assert status == 400 and reply["error"]["code"] == -32021
        assert reply["error"]["data"]["requiredCapabilities"] == {"sampling": {}}
        call = {"name": "test_input_required_result_elicitation", "arguments": {}}
        for bad, words in (({"inputResponses": None}, "inputResponses must be an object"),
                           ({"inputResponses": {"user_name": 12345}}, "inputResponses['user_name'] is not a valid answer (not an object")):
            status, reply = modern_post(served, "tools/call", {**call, **bad}, name=call["name"])
            assert reply["error"]["code"] == -32602 and words in reply["error"]["message"], reply
        status, reply = modern_post(served, "tools/call", call, name=call["name"])
        assert status == 200 and reply["result"]["resultType"] == "input_required"
        assert reply["result"]["inputRequests"]["user_name"]["method"] == "elicitation/create"


async def test_request_state_survives_a_restart_and_spans_workers(tmp_path):
    from mcp import Client

    call = {"name": "test_input_required_result_request_state", "arguments": {}}
    with serve_http(tmp_path) as served:
        _, first = modern_post(served, "tools/call", call, name=call["name"])
    key = tmp_path / "data" / "request-state.key"
    assert key.exists() and stat.S_IMODE(key.stat().st_mode) == 0o600
    state = first["result"]["requestState"]
    retry = {**call, "requestState": state, "inputResponses": {"confirm": {"action": "accept", "content": {"ok": True}}}}
    with serve_http(tmp_path) as served:  # a new process, the same data directory: the same key
        _, done = modern_post(served, "tools/call", retry, name=call["name"])
        assert "state-ok" in done["result"]["content"][0]["text"], done
    with serve_http(tmp_path / "elsewhere") as served:  # another data directory: another key
        status, refused = modern_post(served, "tools/call", retry, name=call["name"])
        assert refused["error"]["code"] == -32602 and "Invalid or expired requestState" in refused["error"]["message"]
    answers = Answers()
    with serve_http(tmp_path, "--stateless", "--workers", "2") as served:
        async with Client(served.url, mode="auto", **answers.callbacks()) as client:
            for _ in range(8):  # rounds land on either worker; every one must be accepted
                r = await client.call_tool("test_input_required_result_multi_round", {})
                assert not r.is_error and "likes teal" in r.content[0].text, r
    assert len(answers.asked) == 16


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_documented_example_runs_as_written(plexor, mode):
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "authoring.md").read_text(encoding="utf-8")
    section = doc.split("## Asking the client", 1)[1].split("\n## ", 1)[0]
    (example,) = re.findall(r"```python\n(.*?)```", section, re.S)
    space: dict[str, Any] = {}
    exec(compile(example, "docs/authoring.md", "exec"), space)  # noqa: S102 - our own documentation

    class Trips:
        PLEXOR_NAMESPACE = "trips"

        @hookimpl
        def plexor_register_tools(self, register, settings):
            register(space["plan_trip"])

    answers = Answers(content={"name": "Dee", "adults": 2})
    async with plexor.client([("trips", Trips())], mode=mode, **answers.callbacks()) as client:
        r = await client.call_tool("trips_plan_trip", {"city": "Oslo"})
    assert r.structured_content == {"traveller": "Dee", "pitch": "Lovely."}
    assert sorted(answers.asked) == ["One sentence selling Oslo.", "Who is travelling?"]  # once each


WEATHER = {"name": "weather", "description": "The weather in a city.",
           "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


class Voyager:
    """Asks with URL-mode elicitation and with sampling that offers the model a tool."""

    PLEXOR_NAMESPACE = "voy"

    @hookimpl
    def plexor_register_tools(self, register, settings):
        async def signin(ctx: Context) -> dict:
            """Send the user to a sign-in page."""
            got = await ctx.elicit_url("Sign in to Example to continue.", "https://example.org/login?x=1",
                                       elicitation_id="login-1")
            told = await ctx.elicitation_complete("login-1") if got["action"] == "accept" else False
            return {"action": got["action"], "told": told, "can": ctx.can_ask("elicitation.url")}

        async def forecast(ctx: Context) -> dict:
            """Let the client's model call a weather tool."""
            first = await ctx.sample("Should I take an umbrella in Lyon?", tools=[WEATHER], tool_choice="auto",
                                     max_tokens=50, key="first")
            use = first["content"][0]
            weather = {"type": "tool_result", "toolUseId": use["id"],
                       "content": [{"type": "text", "text": "rain all day"}]}
            final = await ctx.sample([
                {"role": "user", "content": {"type": "text", "text": "Should I take an umbrella in Lyon?"}},
                {"role": "assistant", "content": first["content"]},
                {"role": "user", "content": [weather]},
            ], tools=[WEATHER], max_tokens=50, key="final")
            return {"asked": use["name"], "input": use["input"], "stop": first["stopReason"],
                    "answer": final["content"]["text"] if isinstance(final["content"], dict) else final["content"][0]["text"]}

        register(signin)
        register(forecast)


class Traveller:
    """Client callbacks for Voyager: opens pages, and a model that uses the weather tool once."""

    def __init__(self, action: str = "accept") -> None:
        self.action = action
        self.pages: list[tuple[str, str, str | None]] = []
        self.samples: list[list[str]] = []
        self.completed: list[str] = []

    async def elicit(self, context, params):
        self.pages.append((params.mode, params.url, params.elicitation_id))
        return types.ElicitResult(action=self.action)

    async def sample(self, context, params):
        self.samples.append([t.name for t in params.tools or []])
        last = params.messages[-1].content
        if isinstance(last, list) and last and last[0].type == "tool_result":
            return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="Yes."),
                                             model="m", stop_reason="endTurn")
        return types.CreateMessageResultWithTools(
            role="assistant", model="m", stop_reason="toolUse",
            content=[types.ToolUseContent(type="tool_use", id="use-1", name="weather", input={"city": "Lyon"})])

    async def messages(self, message):
        root = getattr(message, "root", message)
        if isinstance(root, types.ElicitCompleteNotification):
            self.completed.append(root.params.elicitation_id)

    def callbacks(self, tools: bool = True) -> dict:
        caps = types.SamplingCapability(tools=types.SamplingToolsCapability()) if tools else None
        return {"elicitation_callback": self.elicit, "sampling_callback": self.sample,
                "sampling_capabilities": caps, "message_handler": self.messages}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_url_mode_elicitation_in_both_eras(plexor, mode):
    traveller = Traveller()
    async with plexor.client([("voy", Voyager())], mode=mode, **traveller.callbacks()) as client:
        r = await client.call_tool("voy_signin", {})
        version = client.protocol_version
    assert not r.is_error, r.content
    legacy = version == "2025-11-25"
    # 2026-07-28 input requests carry no elicitationId (removed from the spec at that version)
    assert traveller.pages == [("url", "https://example.org/login?x=1", "login-1" if legacy else None)]
    assert r.structured_content == {"action": "accept", "told": legacy, "can": True}
    assert traveller.completed == (["login-1"] if legacy else [])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sampling_with_tools_in_both_eras(plexor, mode):
    traveller = Traveller()
    async with plexor.client([("voy", Voyager())], mode=mode, **traveller.callbacks()) as client:
        r = await client.call_tool("voy_forecast", {})
    assert not r.is_error, r.content
    assert r.structured_content == {"asked": "weather", "input": {"city": "Lyon"}, "stop": "toolUse", "answer": "Yes."}
    assert traveller.samples == [["weather"], ["weather"]]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sampling_with_tools_needs_the_clients_tools_capability(plexor, mode):
    async with plexor.client([("voy", Voyager())], mode=mode, **Traveller().callbacks(tools=False)) as client:
        if mode == "auto":
            with pytest.raises(MCPError) as err:
                await client.call_tool("voy_forecast", {})
            assert err.value.error.code == -32021
            assert err.value.error.data["requiredCapabilities"] == {"sampling": {"tools": {}}}
            text = err.value.error.message
        else:
            r = await client.call_tool("voy_forecast", {})
            assert r.is_error
            text = r.content[0].text
    assert "did not declare the sampling with tools capability" in text


def test_url_elicitation_refuses_what_is_not_a_web_page():
    from plexor import ElicitURL

    for bad in ("ftp://example.org/x", "http://example.org/login", "example.org", ""):
        with pytest.raises(PlexorError, match="needs an https:// URL"):
            ElicitURL("Sign in", bad)
    assert ElicitURL("Local", "http://localhost:8080/cb").url == "http://localhost:8080/cb"
    with pytest.raises(PlexorError, match="tool_choice"):
        Sample("x", tools=[WEATHER], tool_choice="always")
    with pytest.raises(PlexorError, match="is not a tool"):
        Sample("x", tools=[{"name": "t"}])


async def test_a_2025_client_on_a_stateless_server_is_told_why_it_cannot_be_asked(tmp_path):
    """--stateless HTTP never sees a 2025-11-25 client's initialize: ctx.ask says so and what to do instead."""
    from mcp import Client

    answers = Answers()
    with serve_http(tmp_path, "--stateless") as served:
        async with Client(served.url, mode="legacy", **answers.callbacks()) as client:
            assert client.protocol_version == "2025-11-25"
            r = await client.call_tool("test_input_required_result_elicitation", {})
    text = r.content[0].text
    assert r.is_error, r
    assert "did not declare" not in text
    assert "stateless HTTP (--stateless)" in text and "2025-11-25" in text and "'user_name'" in text
    assert "Run the server stateful" in text and "sticky sessions" in text and "2026-07-28 client" in text
    assert answers.asked == []
    # The same client on a stateful server is asked, and answers.
    with serve_http(tmp_path / "stateful") as served:
        async with Client(served.url, mode="legacy", **answers.callbacks()) as client:
            r = await client.call_tool("test_input_required_result_elicitation", {})
    assert not r.is_error, r
    assert len(answers.asked) == 1
