"""A resource reader chooses its MIME type per read by returning ``plexor.embedded_resource``."""

from __future__ import annotations

import base64

import pytest
from conftest import make_plugin

from plexor import embedded_resource

pytestmark = pytest.mark.anyio


async def test_a_reader_returning_an_embedded_resource_sets_the_mime_type_of_that_read(plexor):
    def templates(register, settings):
        def read(name: str):
            if name.endswith(".pdf"):
                return embedded_resource(f"files://doc/{name}", blob=b"%PDF-1.4", mime_type="application/pdf")
            if name.endswith(".md"):
                return embedded_resource(f"files://doc/{name}", text="# hi", mime_type="text/markdown")
            return {"name": name}  # a plain dict is still JSON, with the registered type

        register("files://doc/{name}", read, mime_type="application/json")

    async with plexor.client([("files", make_plugin("files", plexor_register_resource_templates=templates))]) as client:
        pdf = (await client.read_resource("files://doc/a.pdf")).contents[0]
        assert pdf.mime_type == "application/pdf" and base64.b64decode(pdf.blob) == b"%PDF-1.4"
        md = (await client.read_resource("files://doc/b.md")).contents[0]
        assert md.mime_type == "text/markdown" and md.text == "# hi"
        other = (await client.read_resource("files://doc/c.txt")).contents[0]
        assert other.mime_type == "application/json" and other.text == '{"name": "c.txt"}'
