"""A2A message parts ↔ LangGraph: a message's parts as a run's input or as the answer to pending
interrupts, and a thread's messages as A2A messages and artifacts.

- Input: text parts (joined by newlines) → ``{"messages": [{"role": "user", "content": text}]}``;
  one DataPart ``{"task": {...}}`` or ``{"messages": [...]}`` is the input as it is (the built-in
  agent's demo tasks). File parts are refused (unsupported content type), as are both kinds at
  once.
- Answer (an input-required task): a DataPart ``{"decisions": [...], "interrupt_id"?: ...}``
  (LangChain's human-in-the-loop answer), a DataPart ``{"resume": ...}`` (LangGraph Server's: the
  resume value itself, or a map from interrupt id to answer), or the text ``approve`` /
  ``reject`` / ``reject: <reason>``, one such decision for each action the interrupt asks about.
- Output: AI messages with text → agent messages and artifacts; human messages → user messages;
  tool messages are left out, as on LangGraph Server.
"""

from __future__ import annotations

from typing import Any

from a2a.types.a2a_pb2 import Artifact, Message, Part, Role
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value

from api.contract import hitl

DECISION_HELP = (
    'answer with a DataPart {"decisions": [{"type": "approve"}]} (one decision per action, '
    '"reject" with an optional "message", or "edit" with "edited_action"), optionally with '
    '"interrupt_id", or with the text "approve" or "reject: <reason>"'
)


def plain(value: Any) -> Any:
    """JSON from a protobuf ``Value``: integral numbers as ints (protobuf has only doubles)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def data_of(part: Part) -> Any:
    return plain(MessageToDict(part)["data"]) if part.HasField("data") else None


def data_part(value: Any) -> Part:
    return Part(data=ParseDict(value, Value()))


def _split(message: Message) -> tuple[list[str], list[Any]]:
    texts: list[str] = []
    datas: list[Any] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            datas.append(data_of(part))
        else:
            raise ContentTypeNotSupportedError(
                f"A {kind or 'empty'} part is not supported here: send text parts, or one data "
                'part ({"messages": [...]} or {"task": {...}}).'
            )
    if not texts and not datas:
        raise InvalidParamsError("The message has no parts: send a text part or a data part.")
    return texts, datas


def run_input(message: Message) -> Any:
    """The input of the run a new task starts with."""
    texts, datas = _split(message)
    if datas:
        if texts or len(datas) > 1:
            raise InvalidParamsError(
                "Send either text parts or one data part as the input, not both or several."
            )
        data = datas[0]
        if not isinstance(data, dict) or not ({"task", "messages"} & set(data)):
            raise InvalidParamsError(
                'A data part as input is an object with "messages" (a list of messages) or '
                '"task" (a demo task of the built-in agent); send text parts otherwise.'
            )
        return data
    said: dict[str, Any] = {"role": "user", "content": "\n".join(texts)}
    if message.message_id:  # the task's history shows the client's own message id
        said["id"] = message.message_id
    return {"messages": [said]}


def _text_decisions(text: str, count: int) -> list[dict[str, Any]]:
    word, _, reason = text.strip().partition(":")
    word = word.strip().lower()
    if word in ("approve", "approved", "yes") and not reason:
        return [{"type": "approve"}] * count
    if word in ("reject", "rejected", "no"):
        decision: dict[str, Any] = {"type": "reject"}
        if reason.strip():
            decision["message"] = reason.strip()
        return [decision] * count
    raise InvalidParamsError(
        f"The task waits for an answer to its approval request: {DECISION_HELP}."
    )


def answer(message: Message, pending: dict[str, Any]) -> dict[str, Any]:
    """Interrupt id → answer, for the pending interrupts (id → value) the message answers."""
    texts, datas = _split(message)
    if len(datas) > 1 or (datas and texts):
        raise InvalidParamsError(f"Send one answer: {DECISION_HELP}.")
    if datas:
        data = datas[0]
        if not isinstance(data, dict):
            raise InvalidParamsError(f"The answer is an object: {DECISION_HELP}.")
        if "resume" in data:
            resume = data["resume"]
            if isinstance(resume, dict) and resume and set(resume) <= set(pending):
                return dict(resume)
            if len(pending) != 1:
                raise InvalidParamsError(
                    f"{len(pending)} interrupts are pending ({list(pending)}): send "
                    '{"resume": {<interrupt id>: <answer>, ...}}.'
                )
            return {next(iter(pending)): resume}
        if "decisions" not in data:
            raise InvalidParamsError(f"The answer has no decisions: {DECISION_HELP}.")
        target = data.get("interrupt_id")
        if target is None:
            if len(pending) != 1:
                raise InvalidParamsError(
                    f"{len(pending)} interrupts are pending ({list(pending)}): name one with "
                    '"interrupt_id".'
                )
            target = next(iter(pending))
        if not isinstance(target, str):
            raise InvalidParamsError("interrupt_id is a string: the id of a pending interrupt.")
        return {target: {"decisions": data["decisions"]}}
    if len(pending) != 1:
        raise InvalidParamsError(
            f"{len(pending)} interrupts are pending: answer each with a data part "
            '{"interrupt_id": ..., "decisions": [...]}.'
        )
    interrupt_id, value = next(iter(pending.items()))
    return {interrupt_id: {"decisions": _text_decisions("\n".join(texts), hitl.count(value))}}


def is_answer(message: Message) -> bool:
    """Whether the message reads as an answer to an approval request."""
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "data":
            data = data_of(part)
            if isinstance(data, dict) and {"decisions", "resume", "interrupt_id"} & set(data):
                return True
        elif kind == "text":
            word = part.text.strip().partition(":")[0].strip().lower()
            if word in ("approve", "approved", "reject", "rejected"):
                return True
    return False


def text_of(content: Any) -> str:
    """A LangChain message's text (its text blocks, for block content)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b if isinstance(b, str) else str(b.get("text", ""))
            for b in content
            if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
        )
    return ""


def role_of(message: Any) -> Role | None:
    """ROLE_USER, ROLE_AGENT, or None for messages A2A does not show (tools, system)."""
    if not isinstance(message, dict):
        return None
    kind = str(message.get("type") or message.get("role") or "").lower()
    if kind in ("human", "user"):
        return Role.ROLE_USER
    if kind in ("ai", "assistant"):
        return Role.ROLE_AGENT
    return None


def to_message(message: dict[str, Any], task_id: str, context_id: str) -> Message | None:
    role = role_of(message)
    text = text_of(message.get("content"))
    if role is None or not text:
        return None
    return Message(
        message_id=str(message.get("id") or ""),
        role=role,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


def history(messages: Any, task_id: str, context_id: str) -> list[Message]:
    out = []
    for message in messages if isinstance(messages, list) else []:
        converted = to_message(message, task_id, context_id) if isinstance(message, dict) else None
        if converted is not None:
            out.append(converted)
    return out


def response_artifact(message: dict[str, Any], assistant_id: str) -> Artifact:
    """An AI message as the artifact that carries the agent's response (its id the message's)."""
    return Artifact(
        artifact_id=str(message.get("id") or "response"),
        name="Assistant Response",
        description=f"Response from assistant {assistant_id}",
        parts=[Part(text=text_of(message.get("content")))],
    )


def interrupt_artifact(interrupts: list[dict[str, Any]]) -> Artifact:
    """The pending interrupts (``{id, value}``), as LangGraph Server's ``Interrupt`` artifact."""
    return Artifact(
        artifact_id="interrupt-" + "-".join(str(i["id"]) for i in interrupts)[:200],
        name="Interrupt",
        description="Agent requires input to continue",
        parts=[data_part({"id": i["id"], "value": i["value"]}) for i in interrupts],
    )


def input_request(interrupts: list[dict[str, Any]], task_id: str, context_id: str) -> Message:
    """The status message of an input-required task: what to answer, and each interrupt."""
    return Message(
        message_id=f"{task_id}:input-required",
        role=Role.ROLE_AGENT,
        task_id=task_id,
        context_id=context_id,
        parts=[
            Part(text=f"Approval needed: {DECISION_HELP}."),
            *(data_part({"interrupt_id": i["id"], "value": i["value"]}) for i in interrupts),
        ],
    )


def agent_text(text: str, task_id: str, context_id: str, message_id: str) -> Message:
    return Message(
        message_id=message_id,
        role=Role.ROLE_AGENT,
        task_id=task_id,
        context_id=context_id,
        parts=[Part(text=text)],
    )
