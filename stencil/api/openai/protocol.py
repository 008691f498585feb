"""Pydantic models of the OpenAI-compatible wire format (requests strict, responses plain).

Requests forbid unknown fields: a field the server cannot honour is a 400 naming it, never
silently ignored. Responses are built as plain dicts by the server, except the shared pieces here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

KNOWN_BACKENDS = (
    "auto",
    "stencil",
    "xgrammar",
    "guidance",
    "llguidance",
    "outlines",
    "lm-format-enforcer",
)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---- messages ---------------------------------------------------------------------------------


class ContentPart(BaseModel):
    """One content part. Only ``text`` (and ``refusal`` in assistant messages) can be served;
    ``convert`` answers 400 for other types, naming them."""

    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None
    refusal: str | None = None


Content = str | list[ContentPart]


class FunctionCall(Strict):
    name: str
    arguments: str | dict[str, Any]


class ToolCall(Strict):
    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class SystemMessage(Strict):
    role: Literal["system", "developer"]
    content: Content
    name: str | None = None


class UserMessage(Strict):
    role: Literal["user"]
    content: Content
    name: str | None = None


class AssistantMessage(Strict):
    role: Literal["assistant"]
    content: Content | None = None
    tool_calls: list[ToolCall] | None = None
    refusal: str | None = None
    name: str | None = None
    # this server's reasoning (harmony's analysis), sent back with the message as history
    reasoning_content: str | None = None
    # Null when a client sends back the SDK's response message object as history; a value is
    # refused by ``surface`` (the deprecated function-calling API, audio output).
    function_call: Any = None
    audio: Any = None
    annotations: list[Any] | None = None


class ToolMessage(Strict):
    role: Literal["tool"]
    content: Content
    tool_call_id: str
    name: str | None = None  # not in OpenAI's type; LangChain and vLLM send it


class FunctionMessage(BaseModel):
    """The deprecated ``function`` role: parsed only to be refused with its reason."""

    role: Literal["function"]


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage | FunctionMessage,
    Field(discriminator="role"),
]


# ---- tools and response formats ---------------------------------------------------------------


class FunctionDef(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(Strict):
    type: Literal["function"]
    function: FunctionDef


class CustomTool(BaseModel):
    """A ``custom`` (free-form grammar) tool: parsed only to be refused with its reason."""

    type: Literal["custom"]


AnyTool = Annotated[Tool | CustomTool, Field(discriminator="type")]


class NamedFunction(Strict):
    name: str


class NamedToolChoice(Strict):
    type: Literal["function"]
    function: NamedFunction


class AllowedTools(Strict):
    mode: Literal["auto", "required"]
    tools: list[NamedToolChoice] = Field(min_length=1)


class AllowedToolChoice(Strict):
    """``{"type": "allowed_tools", ...}``: a subset of ``tools`` with a mode."""

    type: Literal["allowed_tools"]
    allowed_tools: AllowedTools


class NamedCustomToolChoice(BaseModel):
    """``{"type": "custom", ...}``: parsed only to be refused (custom tools are not served)."""

    type: Literal["custom"]


ToolChoice = (
    Literal["none", "auto", "required"]
    | Annotated[
        NamedToolChoice | AllowedToolChoice | NamedCustomToolChoice, Field(discriminator="type")
    ]
)


class JsonSchemaSpec(Strict):
    name: str | None = None
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ResponseFormatText(Strict):
    type: Literal["text"]


class ResponseFormatJsonObject(Strict):
    type: Literal["json_object"]


class ResponseFormatJsonSchema(Strict):
    type: Literal["json_schema"]
    json_schema: JsonSchemaSpec


ResponseFormat = Annotated[
    ResponseFormatText | ResponseFormatJsonObject | ResponseFormatJsonSchema,
    Field(discriminator="type"),
]


class StructuredOutputs(Strict):
    """vLLM's ``structured_outputs`` object (exactly one of json/regex/choice/grammar/json_object)."""

    json_: dict[str, Any] | str | None = Field(default=None, alias="json")
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
    whitespace_pattern: str | None = None
    disable_any_whitespace: bool | None = None
    disable_additional_properties: bool | None = None
    source_text: str | None = None
    """Stencil's grounding extension: strings marked ``"x-grounded": true`` in the schema (or,
    with ``ground_strings``, every plain string) only take verbatim spans of this text;
    ``ground_numbers`` / ``ground_dates``: free numbers and ``format: date`` strings only the
    numbers and dates it states."""
    ground_strings: bool | None = None
    ground_numbers: bool | None = None
    ground_dates: bool | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class StreamOptions(Strict):
    include_usage: bool | None = None


# ---- requests ---------------------------------------------------------------------------------


class SamplingFields(Strict):
    """Fields shared by chat and completion requests (OpenAI + vLLM extensions)."""

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    n: int = Field(default=1, ge=1, le=16)
    stop: str | list[str] | None = None
    seed: int | None = None
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    logit_bias: dict[str, float] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    response_format: ResponseFormat | None = None
    # vLLM extensions
    guided_json: dict[str, Any] | str | None = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None
    guided_whitespace_pattern: str | None = None
    guided_decoding_backend: str | None = None
    structured_outputs: StructuredOutputs | None = None
    top_k: int | None = None
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    repetition_penalty: float | None = Field(default=None, gt=0.0, le=10.0)
    min_tokens: int = Field(default=0, ge=0)
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    echo: bool = False


class ChatCompletionRequest(SamplingFields):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    tools: list[AnyTool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool = True
    modalities: list[str] | None = None
    # passed to the chat template when it reads them (``surface``)
    reasoning_effort: str | None = None
    verbosity: str | None = None
    # advisory: accepted, no effect (``surface``)
    metadata: dict[str, str] | None = None
    store: bool | None = None
    service_tier: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    prompt_cache_options: dict[str, Any] | None = None
    prediction: dict[str, Any] | None = None
    # refused with their reason when set (``surface``)
    audio: Any = None
    functions: Any = None
    function_call: Any = None
    web_search_options: Any = None
    moderation: Any = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    chat_template_kwargs: dict[str, Any] | None = None


PromptInput = str | list[str] | list[int] | list[list[int]]


class CompletionRequest(SamplingFields):
    prompt: PromptInput
    logprobs: int | None = Field(default=None, ge=0, le=20)
    best_of: int | None = Field(default=None, ge=1)
    suffix: str | None = None
    max_tokens: int | None = Field(default=16, ge=1)


class EmbeddingRequest(Strict):
    model: str | None = None
    input: str | list[str] | list[int] | list[list[int]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(default=None, ge=1)
    user: str | None = None


class TokenizeRequest(Strict):
    model: str | None = None
    prompt: str | None = None
    messages: list[Message] | None = None
    add_special_tokens: bool = True
    add_generation_prompt: bool = True
    chat_template_kwargs: dict[str, Any] | None = None


class DetokenizeRequest(Strict):
    model: str | None = None
    tokens: list[int]
