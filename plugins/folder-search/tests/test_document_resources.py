"""The original documents as MCP resources (folders://{folder}/{+path}), through a real SDK client."""

from __future__ import annotations

import base64
import os
import time

import anyio
import pytest
from conftest import call, wait_ready
from mcp import types

INSTALLED = ["folder-search"]
TEMPLATE = "folders://{folder}/{+path}"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
pytestmark = pytest.mark.anyio


async def _read(client, uri):
    result = await client.read_resource(uri)
    assert len(result.contents) == 1
    return result.contents[0]


async def _refused(client, uri):
    with pytest.raises(Exception) as info:  # noqa: PT011 - the SDK raises its MCPError for a JSON-RPC error
        await client.read_resource(uri)
    return str(info.value)


async def test_documents_are_listed_completed_and_read_as_text_or_blobs(plexor, plexor_config, corpus, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("the secret outside\n")
    os.symlink(outside, corpus / "link.txt")
    plexor_config({"folder-search": {"folders": [str(corpus)]}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        templates = (await client.list_resource_templates()).resource_templates
        mine = [t for t in templates if t.uri_template == TEMPLATE]
        assert len(mine) == 1 and mine[0].name == "folder document"
        # Completion of both variables.
        ref = types.ResourceTemplateReference(type="ref/resource", uri=TEMPLATE)
        done = await client.complete(ref, {"name": "folder", "value": "cor"})
        assert done.completion.values == ["corpus"]
        done = await client.complete(ref, {"name": "path", "value": "docs/"})
        assert done.completion.values == ["docs/garden.rst", "docs/page.html", "docs/retry.md"]
        done = await client.complete(ref, {"name": "path", "value": "m"})
        assert done.completion.values == ["manual.pdf"]
        # Text as text, with its MIME type, exactly the file's content.
        item = await _read(client, "folders://corpus/docs/retry.md")
        assert isinstance(item, types.TextResourceContents) and item.mime_type == "text/markdown"
        assert item.text == (corpus / "docs" / "retry.md").read_text()
        item = await _read(client, "folders://corpus/src/pool.py")
        assert isinstance(item, types.TextResourceContents) and item.mime_type == "text/x-python"
        # PDFs and office files as blobs with their MIME type, byte for byte.
        item = await _read(client, "folders://corpus/manual.pdf")
        assert isinstance(item, types.BlobResourceContents) and item.mime_type == "application/pdf"
        assert base64.b64decode(item.blob) == (corpus / "manual.pdf").read_bytes()
        item = await _read(client, "folders://corpus/report.docx")
        assert isinstance(item, types.BlobResourceContents) and item.mime_type == DOCX
        assert base64.b64decode(item.blob) == (corpus / "report.docx").read_bytes()
        # The same path-safety rules as the tools.
        for uri in ("folders://corpus/docs/%2e%2e/%2e%2e/outside.txt", "folders://corpus/..%2Foutside.txt"):
            assert "'..'" in await _refused(client, uri), uri
        text = await _refused(client, "folders://corpus/link.txt")
        assert "outside the folder" in text and "secret" not in text
        text = await _refused(client, "folders://corpus/" + str(outside).lstrip("/"))
        assert "no document" in text or "outside" in text
        assert "not indexed" in await _refused(client, "folders://corpus/broken.pdf")
        text = await _refused(client, "folders://corpus/.git/config")  # in a skipped folder: never indexed
        assert "no document '.git/config'" in text and "wombatcore" not in text
        text = await _refused(client, "folders://corpus/secret/keys.txt")
        assert "no document 'secret/keys.txt'" in text and "wombatsecret" not in text
        # Swapped for links after indexing: a file, and a directory on the path.
        (corpus / "notes.txt").unlink()
        os.symlink(outside, corpus / "notes.txt")
        text = await _refused(client, "folders://corpus/notes.txt")
        assert "secret" not in text and ("outside the folder" in text or "symlink" in text or "not indexed" in text)
        elsewhere = tmp_path / "elsewhere"
        (corpus / "docs").rename(elsewhere)
        os.symlink(elsewhere, corpus / "docs")
        text = await _refused(client, "folders://corpus/docs/retry.md")
        assert "Retry policy" not in text and ("outside the folder" in text or "no document" in text)
        inner = corpus / "src" / "alias.py"
        os.symlink(corpus / "src" / "pool.py", inner)  # a link inside the folder is not followed either
        text = await _refused(client, "folders://corpus/src/alias.py")
        assert "ConnectionPool" not in text
        text = await _refused(client, "folders://corpu/notes.txt")
        assert "no folder named 'corpu'" in text and "Did you mean 'corpus'?" in text


async def test_a_reindexed_document_is_announced_to_subscribers(plexor, plexor_config, corpus):
    plexor_config({"folder-search": {"folders": [str(corpus)]}})
    heard: list[str] = []

    async def on_message(message):
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.append(str(message.params.uri))

    async with plexor.client(installed=INSTALLED, message_handler=on_message) as client:
        await wait_ready(client)
        await client.subscribe_resource("folders://corpus/notes.txt")
        (corpus / "notes.txt").write_text("Shopping list: oat milk, lentils, sumac.\n")
        deadline = time.monotonic() + 5
        while "folders://corpus/notes.txt" not in heard and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        assert "folders://corpus/notes.txt" in heard
        item = await _read(client, "folders://corpus/notes.txt")
        assert "sumac" in item.text
        assert (await call(client, "folders_search_content", exact_terms=["sumac"]))["results"]


async def test_path_completion_follows_the_folder_the_client_chose(plexor, plexor_config, corpus, tmp_path):
    other = tmp_path / "other"
    (other / "docs").mkdir(parents=True)
    (other / "docs" / "ledger.md").write_text("# Ledger\n\nthe other folder's only document\n")
    plexor_config({"folder-search": {"folders": [str(corpus), str(other)]}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        ref = types.ResourceTemplateReference(type="ref/resource", uri=TEMPLATE)
        # The client says which folder it chose (completion/complete's context.arguments): only its paths.
        done = await client.complete(ref, {"name": "path", "value": "docs/"}, {"folder": "other"})
        assert done.completion.values == ["docs/ledger.md"]
        done = await client.complete(ref, {"name": "path", "value": "docs/"}, {"folder": "corpus"})
        assert done.completion.values == ["docs/garden.rst", "docs/page.html", "docs/retry.md"]
        # A client that does not say gets the paths of every folder.
        done = await client.complete(ref, {"name": "path", "value": "docs/"})
        assert done.completion.values == ["docs/garden.rst", "docs/ledger.md", "docs/page.html", "docs/retry.md"]
