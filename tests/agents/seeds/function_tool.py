# The Agents API's function-tool flow (the Functions guide) in Python. The tool's definition and the
# code that answers a required action are the guide's, verbatim; around them, the least a program
# needs: a session that asks for customer 123, its events read until it requires action, then
# until it is idle, and the final message printed. OpenAI() reads OPENAI_BASE_URL and
# OPENAI_API_KEY from the environment, so the test points it at the emulator without editing it.
import json

from openai import OpenAI

client = OpenAI()

get_customer_tool = {
    "type": "function",
    "name": "get_customer",
    "description": "Look up a customer by ID.",
    "parameters": {
        "type": "object",
        "properties": {"customer_id": {"type": "string"}},
        "required": ["customer_id"],
        "additionalProperties": False,
    },
}


def get_customer(arguments):
    # What the guide's Go, Java and Ruby handlers return for an id.
    customer = {"name": "Example Customer", "plan": "pro"} if arguments["customer_id"] == "123" else None
    return {"found": customer is not None, "customer": customer}


def next_event(session_id, *types):
    # The first event of a subscription is the session's state now; then every event as it happens.
    with client.beta.agents.sessions.events.stream(session_id) as events:
        for event in events:
            if event.type in types:
                return event
    raise RuntimeError(f"the session's events ended before any of {types}")


session = client.beta.agents.sessions.create(
    environment={"type": "none"},
    agent={"model": "gpt-5", "tools": [get_customer_tool]},
    input="Look up customer 123.",
)
session_id = session.id

answered = set()
event = next_event(session_id, "agent.session.requires_action", "agent.session.idle")
while event.type == "agent.session.requires_action":
    for action in event.session.required_actions:
        if action.call_id in answered:
            continue  # a state read before the result was applied: it is answered already
        answered.add(action.call_id)

        # The guide's code, verbatim, from here to the call that sends the result.
        action = action.to_dict()

        result = {
            "type": "agent.session.input.tool_result",
            "turn_id": action["turn_id"],
            "call_id": action["call_id"],
        }

        output = get_customer(action["arguments"])
        result.update(success=True, output=json.dumps(output))

        client.beta.agents.sessions.events.create(session_id, events=[result])
    event = next_event(session_id, "agent.session.requires_action", "agent.session.idle")

final = list(client.beta.agents.sessions.items.list(session_id))[-1]
print(final.content[0].text)
