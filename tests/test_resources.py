"""Resources, resource templates, listers, prompts and completion through a real MCP client."""

from __future__ import annotations

import pytest
from conftest import make_plugin
from mcp.shared.exceptions import MCPError
from mcp_types import PaginatedRequestParams

from plexor import Context, NotFound

pytestmark = pytest.mark.anyio

NOTES = {"a": "first note", "b": "second note", "c": "third note"}


def res_plugin(count: int = 3):
    def resources(register, settings):
        register("notes://index", lambda: {"notes": sorted(NOTES)}, name="index", description="All note ids.")
        register("notes://readme", lambda: "plain text readme", mime_type="text/plain")
        register("notes://logo", lambda: b"\x89PNG\r\n", mime_type="image/png")

        def lister(ctx: Context):
            return [{"uri": f"notes://note/{i}", "name": f"note {i}"} for i in range(count)]

        register.lister(lister)

    def templates(register, settings):
        def read_note(note_id: str) -> dict:
            if note_id not in NOTES:
                raise NotFound(f"no note {note_id!r}", f"Known notes: {', '.join(sorted(NOTES))}.")
            return {"id": note_id, "text": NOTES[note_id]}

        register("notes://note/{note_id}", read_note, name="note",
                 complete={"note_id": lambda prefix: [n for n in sorted(NOTES) if n.startswith(prefix)]})

    def prompts(register, settings):
        def summarise(note_id: str, tone: str = "neutral") -> str:
            """Ask for a summary of a note."""
            return f"Summarise note {note_id} in a {tone} tone."

        register(summarise)

    return make_plugin("notes", plexor_register_resources=resources, plexor_register_resource_templates=templates,
                       plexor_register_prompts=prompts)


async def test_fixed_resources_read_as_json_text_and_blob(plexor):
    async with plexor.client([("notes", res_plugin())]) as client:
        index = await client.read_resource("notes://index")
        assert index.contents[0].text == '{"notes": ["a", "b", "c"]}'
        assert index.contents[0].mime_type == "application/json"
        readme = await client.read_resource("notes://readme")
        assert readme.contents[0].text == "plain text readme"
        logo = await client.read_resource("notes://logo")
        assert logo.contents[0].blob == "iVBORw0K"


async def test_template_reads_match_variables(plexor):
    async with plexor.client([("notes", res_plugin())]) as client:
        note = await client.read_resource("notes://note/b")
        assert note.contents[0].text == '{"id": "b", "text": "second note"}'
        templates = await client.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == ["notes://note/{note_id}"]


async def test_not_found_resources_are_errors_with_guidance(plexor):
    async with plexor.client([("notes", res_plugin())]) as client:
        with pytest.raises(MCPError) as missing:
            await client.read_resource("notes://note/zzz")
        assert missing.value.code == -32002
        assert "Known notes: a, b, c" in str(missing.value)
        with pytest.raises(MCPError) as unknown_form:
            await client.read_resource("notes://nothing/here")
        assert "notes serves: notes://index, notes://logo, notes://note/{note_id}, notes://readme" in str(unknown_form.value)
        with pytest.raises(MCPError) as scheme:
            await client.read_resource("other://x")
        assert "Known schemes: notes://" in str(scheme.value)


async def test_resources_list_includes_listed_ones_and_paginates(plexor):
    async with plexor.client([("notes", res_plugin(count=250))], env={"PLEXOR_PAGE_SIZE": "100"}) as client:
        seen = []
        cursor = None
        pages = 0
        while True:
            page = await client.session.list_resources(params=PaginatedRequestParams(cursor=cursor))
            seen.extend(r.uri for r in page.resources)
            pages += 1
            cursor = page.next_cursor
            if cursor is None:
                break
        assert pages == 3
        assert len(seen) == 253 and len(set(seen)) == 253
        assert "notes://note/249" in seen and "notes://index" in seen


async def test_a_failing_lister_does_not_break_resources_list(plexor):
    def resources(register, settings):
        register("ok://fixed", lambda: {"ok": True})

        def lister():
            raise RuntimeError("index unavailable")

        register.lister(lister)

    async with plexor.client([("ok", make_plugin("ok", plexor_register_resources=resources))]) as client:
        listed = await client.list_resources()
        assert [r.uri for r in listed.resources] == ["ok://fixed"]


async def test_prompts_list_and_get(plexor):
    async with plexor.client([("notes", res_plugin())]) as client:
        prompts = await client.list_prompts()
        prompt = prompts.prompts[0]
        assert prompt.name == "notes_summarise"
        args = {a.name: a.required for a in prompt.arguments}
        assert args == {"note_id": True, "tone": False}
        got = await client.get_prompt("notes_summarise", {"note_id": "a", "tone": "cheerful"})
        assert got.messages[0].content.text == "Summarise note a in a cheerful tone."
        with pytest.raises(MCPError, match="(?s)unknown prompt 'notes_summary'.*Did you mean 'notes_summarise'") as unknown:
            await client.get_prompt("notes_summary", {})
        assert unknown.value.code == -32602  # MCP: an unknown prompt name is invalid params
        with pytest.raises(MCPError, match="argument 'note_id' is required"):
            await client.get_prompt("notes_summarise", {})


async def test_completion_of_template_variables(plexor):
    from mcp_types import ResourceTemplateReference

    async with plexor.client([("notes", res_plugin())]) as client:
        result = await client.complete(ResourceTemplateReference(type="ref/resource", uri="notes://note/{note_id}"),
                                       {"name": "note_id", "value": "b"})
        assert result.completion.values == ["b"]


async def test_completion_functions_can_ask_for_the_context(plexor):
    from mcp_types import ResourceTemplateReference

    def templates(register, settings):
        def complete_id(prefix: str, ctx: Context) -> list[str]:
            return [k for k in sorted(ctx.service(set)) if k.startswith(prefix)]

        register("ctxnotes://note/{note_id}", lambda note_id: {}, complete={"note_id": complete_id})

    def startup(plugin):
        plugin.provide({"alpha", "alps", "beta"})

    plugin = make_plugin("ctxnotes", plexor_register_resource_templates=templates, plexor_startup=startup)
    async with plexor.client([("ctxnotes", plugin)]) as client:
        ref = ResourceTemplateReference(type="ref/resource", uri="ctxnotes://note/{note_id}")
        result = await client.complete(ref, {"name": "note_id", "value": "al"})
        assert result.completion.values == ["alpha", "alps"]


async def test_completion_is_capped_at_100_with_has_more(plexor):
    from mcp_types import ResourceTemplateReference

    def templates(register, settings):
        register("many://item/{item_id}", lambda item_id: {}, complete={"item_id": lambda prefix: [f"{prefix}{i:03d}" for i in range(250)]})

    async with plexor.client([("many", make_plugin("many", plexor_register_resource_templates=templates))]) as client:
        ref = ResourceTemplateReference(type="ref/resource", uri="many://item/{item_id}")
        result = await client.complete(ref, {"name": "item_id", "value": "x"})
        assert len(result.completion.values) == 100 and result.completion.has_more is True
        assert result.completion.values[0] == "x000"
