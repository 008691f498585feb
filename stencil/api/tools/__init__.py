"""Tool calling, in one place: which tools a request offers (``plan``), their constraint
(``constraint``, over each family's call syntax in ``formats`` and its JSON Schemas in
``schema``; GPT-OSS's harmony format in ``harmony``), how they and past calls show in the prompt
(``prompt``), and the reply's calls read back (``parser``, ``harmony_parser``) as OpenAI
``tool_calls`` (``calls``)."""
