"""OpenAI's Responses API (``/v1/responses``): a second renderer of the chat path's events, with
stored responses for ``previous_response_id``."""
