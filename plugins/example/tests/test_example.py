import pytest


@pytest.mark.anyio
async def test_greet_and_about(plexor, plexor_config):
    plexor_config({"example": {"greeting": "Hi"}})
    async with plexor.client(installed=["example"]) as client:
        result = await client.call_tool("example_greet", {"name": "Ada", "times": 2})
        assert not result.is_error
        assert result.structured_content == {"greeting": "Hi, Ada! Hi, Ada!"}

        bad = await client.call_tool("example_greet", {"name": "Ada", "times": 99})
        assert bad.is_error and "from 1 to 10" in bad.content[0].text

        about = await client.read_resource("example://about")
        assert '"greeting": "Hi"' in about.contents[0].text
