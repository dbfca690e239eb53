package ptcemulator.sdk;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.JsonValue;
import com.openai.core.ObjectMappers;
import com.openai.core.Properties;
import com.openai.core.http.ResponseConnection;
import com.openai.core.http.StreamResponse;
import com.openai.core.http.WebSocketWriteNotAttempted;
import com.openai.helpers.ResponseAccumulator;
import com.openai.models.beta.agents.Agent;
import com.openai.models.beta.agents.AgentCreateParams;
import com.openai.models.beta.agents.AgentSession;
import com.openai.models.beta.agents.AgentSessionEvent;
import com.openai.models.beta.agents.AgentSessionInputParam;
import com.openai.models.beta.agents.AgentSessionItem;
import com.openai.models.beta.agents.sessions.SessionCreateParams;
import com.openai.models.beta.agents.sessions.events.EventCreateParams;
import com.openai.models.beta.agents.PersistedAgentToolParam;
import com.openai.models.beta.agents.sessions.turns.Turn;
import com.openai.models.conversations.Conversation;
import com.openai.models.conversations.ConversationCreateParams;
import com.openai.models.conversations.items.ConversationItem;
import com.openai.models.conversations.items.ItemListParams;
import com.openai.models.responses.CompactedResponse;
import com.openai.models.responses.FunctionTool;
import com.openai.models.responses.Response;
import com.openai.models.responses.ResponseCompactParams;
import com.openai.models.responses.ResponseCreateParams;
import com.openai.models.responses.ResponseFunctionToolCall;
import com.openai.models.responses.ResponseInputItem;
import com.openai.models.responses.ResponseItem;
import com.openai.models.responses.ResponseOutputItem;
import com.openai.models.responses.ResponseStatus;
import com.openai.models.responses.ResponseStreamEvent;
import com.openai.models.responses.ResponsesClientEvent;
import com.openai.models.responses.Tool;
import com.openai.models.responses.inputitems.InputItemListParams;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;

/**
 * Flows of the official Java SDK against a ptc-emulator, every response checked by the SDK's own
 * validation ({@code responseValidation(true)}: a missing required field, a wrong type, an unknown
 * union variant or enum value throws).
 *
 * <pre>
 *   java -cp ... ptcemulator.sdk.Flows BASE_URL FLOW...
 * </pre>
 *
 * BASE_URL is the emulator's /v1 URL (a scoped one puts every request in that scope); the key is
 * OPENAI_API_KEY. Each FLOW prints one JSON line: {"flow", "client", "version", "ok", ...}; the exit
 * status is 1 when one failed. {@code version} alone prints the SDK's version as the SDK reads it.
 */
public final class Flows {
    static final String MODEL = "gpt-6-astra";
    static final String TASK = "Compare inventory with demand for sku_123.";
    static final JsonMapper JSON = ObjectMappers.jsonMapper();
    static final int MAX_RESPONSES = 10;

    private final OpenAIClient client;

    Flows(OpenAIClient client) {
        this.client = client;
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("version")) {
            System.out.println(Properties.getPackageVersion());
            return;
        }
        if (args.length < 2) {
            System.err.println("usage: Flows BASE_URL FLOW... | Flows version");
            System.exit(2);
        }
        String key = Optional.ofNullable(System.getenv("OPENAI_API_KEY")).orElse("sk-ptc-emulator");
        OpenAIClient client =
                OpenAIOkHttpClient.builder()
                        .baseUrl(args[0])
                        .apiKey(key)
                        .responseValidation(true)
                        .maxRetries(0)
                        .build();
        Flows flows = new Flows(client);
        boolean failed = false;
        try {
            for (int i = 1; i < args.length; i++) {
                ObjectNode line = JSON.createObjectNode();
                line.put("flow", args[i]);
                line.put("client", "openai-java");
                line.put("version", Properties.getPackageVersion());
                try {
                    line.setAll(flows.run(args[i]));
                    line.put("ok", true);
                } catch (Exception e) {
                    failed = true;
                    line.put("ok", false);
                    line.put("error", e.getClass().getName() + ": " + e.getMessage());
                    StringWriter trace = new StringWriter();
                    e.printStackTrace(new PrintWriter(trace));
                    line.put("trace", trace.toString());
                }
                System.out.println(JSON.writeValueAsString(line));
                System.out.flush();
            }
        } finally {
            client.close();
        }
        System.exit(failed ? 1 : 0);
    }

    ObjectNode run(String flow) throws Exception {
        switch (flow) {
            case "store-false":
                return storeFalse();
            case "previous-response-id":
                return previousResponseId();
            case "streamed":
                return streamed();
            case "websocket":
                return websocket();
            case "compaction":
                return compaction();
            case "context-compaction":
                return contextCompaction();
            case "conversation":
                return conversation();
            case "agents":
                return agents();
            default:
                throw new IllegalArgumentException("no flow named " + flow);
        }
    }

    // ---- the guide's tools and their implementations -------------------------------------------

    static FunctionTool function(String name, String description, String resultField) {
        return FunctionTool.builder()
                .name(name)
                .description(description)
                .parameters(
                        FunctionTool.Parameters.builder()
                                .putAdditionalProperty("type", JsonValue.from("object"))
                                .putAdditionalProperty(
                                        "properties", JsonValue.from(Map.of("sku", Map.of("type", "string"))))
                                .putAdditionalProperty("required", JsonValue.from(List.of("sku")))
                                .putAdditionalProperty("additionalProperties", JsonValue.from(false))
                                .build())
                .outputSchema(
                        FunctionTool.OutputSchema.builder()
                                .putAdditionalProperty("type", JsonValue.from("object"))
                                .putAdditionalProperty(
                                        "properties",
                                        JsonValue.from(
                                                Map.of(
                                                        "sku", Map.of("type", "string"),
                                                        resultField, Map.of("type", "number"))))
                                .putAdditionalProperty("required", JsonValue.from(List.of("sku", resultField)))
                                .putAdditionalProperty("additionalProperties", JsonValue.from(false))
                                .build())
                .strict(true)
                .addAllowedCaller(FunctionTool.AllowedCaller.PROGRAMMATIC)
                .build();
    }

    static final List<Tool> TOOLS =
            List.of(
                    Tool.ofFunction(
                            function(
                                    "get_inventory",
                                    "Return an object with sku (string) and available_units (number).",
                                    "available_units")),
                    Tool.ofFunction(
                            function(
                                    "get_demand",
                                    "Return an object with sku (string) and requested_units (number).",
                                    "requested_units")),
                    Tool.ofProgrammaticToolCalling());

    static Map<String, Object> implementation(String name, JsonNode arguments) {
        String sku = arguments.path("sku").asText();
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("sku", sku);
        switch (name) {
            case "get_inventory":
                result.put("available_units", 42);
                return result;
            case "get_demand":
                result.put("requested_units", 31);
                return result;
            default:
                throw new IllegalArgumentException("Unknown tool: " + name);
        }
    }

    // ---- item helpers -----------------------------------------------------------------------------

    /** An output item replayed as input unchanged: every field as the server sent it. */
    static ResponseInputItem replay(ResponseOutputItem item) {
        return JSON.convertValue(item, ResponseInputItem.class);
    }

    static ResponseInputItem user(String text) {
        return ResponseInputItem.ofMessage(
                ResponseInputItem.Message.builder()
                        .role(ResponseInputItem.Message.Role.USER)
                        .addInputTextContent(text)
                        .build());
    }

    /** The function's result for one call, its caller copied unchanged so the program resumes. */
    static ResponseInputItem output(ResponseFunctionToolCall call) throws Exception {
        JsonNode arguments = JSON.readTree(call.arguments());
        ResponseInputItem.FunctionCallOutput.Builder result =
                ResponseInputItem.FunctionCallOutput.builder()
                        .callId(call.callId())
                        .output(JSON.writeValueAsString(implementation(call.name(), arguments)));
        if (call.caller().isPresent()) {
            result.caller(JSON.convertValue(call.caller().get(), ResponseInputItem.FunctionCallOutput.Caller.class));
        }
        return ResponseInputItem.ofFunctionCallOutput(result.build());
    }

    static List<ResponseFunctionToolCall> calls(Response response) {
        List<ResponseFunctionToolCall> calls = new ArrayList<>();
        for (ResponseOutputItem item : response.output()) {
            if (item.isFunctionCall()) calls.add(item.asFunctionCall());
        }
        return calls;
    }

    /** The final message's text (its output_text parts) or refusal, if the response has one. */
    static Optional<String> message(Response response) {
        for (ResponseOutputItem item : response.output()) {
            if (!item.isMessage()) continue;
            StringBuilder text = new StringBuilder();
            for (var part : item.asMessage().content()) {
                if (part.isOutputText()) text.append(part.asOutputText().text());
                else if (part.isRefusal()) text.append(part.asRefusal().refusal());
            }
            return Optional.of(text.toString());
        }
        return Optional.empty();
    }

    static ArrayNode types(List<?> items) {
        ArrayNode types = JSON.createArrayNode();
        for (Object item : items) types.add(JSON.valueToTree(item).path("type").asText());
        return types;
    }

    static void requireCompleted(Response response) {
        if (!response.status().equals(Optional.of(ResponseStatus.COMPLETED))) {
            throw new IllegalStateException("Response ended with status " + response.status());
        }
    }

    static void requireProgramCallers(List<ResponseFunctionToolCall> calls, Response response) {
        for (ResponseFunctionToolCall call : calls) {
            JsonNode caller = JSON.valueToTree(call.caller().orElseThrow());
            if (!caller.path("type").asText().equals("program")) {
                throw new IllegalStateException("expected a program caller on " + call.callId() + ": " + caller);
            }
            boolean known = false;
            for (ResponseOutputItem item : response.output()) {
                known |= item.isProgram() && item.asProgram().callId().equals(caller.path("caller_id").asText());
            }
            if (!known) throw new IllegalStateException("no program " + caller + " in the response");
        }
    }

    // ---- 1. the guide's loop, store: false, every output item replayed ---------------------------

    /** The loop over one turn function (a create, streamed or not), replaying every item. */
    ObjectNode replayLoop(Function<List<ResponseInputItem>, Response> turn) throws Exception {
        List<ResponseInputItem> items = new ArrayList<>(List.of(user(TASK)));
        ArrayNode routes = JSON.createArrayNode();
        int pauses = 0;
        for (int n = 1; n <= MAX_RESPONSES; n++) {
            Response response = turn.apply(List.copyOf(items));
            requireCompleted(response);
            routes.add(types(response.output()));
            // Preserve every output item, including program and reasoning items.
            for (ResponseOutputItem item : response.output()) items.add(replay(item));
            List<ResponseFunctionToolCall> calls = calls(response);
            if (calls.isEmpty()) {
                Optional<String> answer = message(response);
                if (answer.isEmpty()) continue;
                ObjectNode result = JSON.createObjectNode();
                result.put("answer", answer.get());
                result.put("responses", n);
                result.put("pauses", pauses);
                result.set("routes", routes);
                result.set("replayed", types(items));
                result.set("store", JSON.valueToTree(response).path("store"));
                return result;
            }
            pauses++;
            requireProgramCallers(calls, response);
            for (ResponseFunctionToolCall call : calls) items.add(output(call));
        }
        throw new IllegalStateException("no final message after " + MAX_RESPONSES + " responses");
    }

    ResponseCreateParams.Builder create(List<ResponseInputItem> items) {
        return ResponseCreateParams.builder().model(MODEL).store(false).inputOfResponse(items).tools(TOOLS);
    }

    ObjectNode storeFalse() throws Exception {
        return replayLoop(items -> client.responses().create(create(items).build()));
    }

    // ---- 2. the same loop, stored, continued by previous_response_id ---------------------------

    ObjectNode previousResponseId() throws Exception {
        Response response =
                client.responses().create(ResponseCreateParams.builder().model(MODEL).input(TASK).tools(TOOLS).build());
        String first = response.id();
        ArrayNode routes = JSON.createArrayNode();
        int pauses = 0;
        for (int n = 1; n <= MAX_RESPONSES; n++) {
            requireCompleted(response);
            routes.add(types(response.output()));
            List<ResponseFunctionToolCall> calls = calls(response);
            if (calls.isEmpty() && message(response).isPresent()) {
                ObjectNode result = JSON.createObjectNode();
                result.put("answer", message(response).get());
                result.put("responses", n);
                result.put("pauses", pauses);
                result.set("routes", routes);
                result.put("previous_response_id", response.previousResponseId().orElse(null));
                result.put("first_status", client.responses().retrieve(first).status().orElseThrow().asString());
                List<ResponseItem> inputs =
                        client.responses()
                                .inputItems()
                                .list(InputItemListParams.builder().responseId(response.id()).build())
                                .data();
                result.set("last_input_items", types(inputs));
                return result;
            }
            ResponseCreateParams.Builder next =
                    ResponseCreateParams.builder().model(MODEL).previousResponseId(response.id()).tools(TOOLS);
            if (!calls.isEmpty()) {
                pauses++;
                requireProgramCallers(calls, response);
                List<ResponseInputItem> outputs = new ArrayList<>();
                for (ResponseFunctionToolCall call : calls) outputs.add(output(call));
                next.inputOfResponse(outputs);
            }
            response = client.responses().create(next.build());
        }
        throw new IllegalStateException("no final message after " + MAX_RESPONSES + " responses");
    }

    // ---- 3. the loop streamed (SSE), each stream accumulated by the SDK's helper -------------------

    ObjectNode streamed() throws Exception {
        Map<String, Integer> events = new LinkedHashMap<>();
        ObjectNode result =
                replayLoop(
                        items -> {
                            ResponseAccumulator accumulator = ResponseAccumulator.create();
                            long last = -1;
                            try (StreamResponse<ResponseStreamEvent> stream =
                                    client.responses().createStreaming(create(items).build())) {
                                for (ResponseStreamEvent event : (Iterable<ResponseStreamEvent>) stream.stream()::iterator) {
                                    accumulator.accumulate(event);
                                    JsonNode tree = JSON.valueToTree(event);
                                    long sequence = tree.path("sequence_number").asLong(-1);
                                    if (sequence <= last) {
                                        throw new IllegalStateException(
                                                "sequence_number went from " + last + " to " + sequence);
                                    }
                                    last = sequence;
                                    events.merge(tree.path("type").asText(), 1, Integer::sum);
                                }
                            }
                            return accumulator.response();
                        });
        result.set("events", JSON.valueToTree(events));
        return result;
    }

    // ---- 4. the loop over the Responses WebSocket, on two lanes at once -------------------------

    /**
     * Sends on a lane. OkHttp's transport admits one frame at a time: while the previous frame is
     * still being written it refuses with {@code WebSocketWriteNotAttempted.Busy}, which proves that
     * nothing was sent, and the SDK leaves the retry to the caller.
     */
    static void send(ResponseConnection.Lane lane, ResponsesClientEvent event) throws InterruptedException {
        for (int attempt = 1; ; attempt++) {
            try {
                lane.send(event);
                return;
            } catch (WebSocketWriteNotAttempted.Busy busy) {
                if (attempt == 6000) throw busy;
                Thread.sleep(5);
            }
        }
    }

    ObjectNode websocket() throws Exception {
        String[] skus = {"sku_123", "sku_456"};
        ObjectNode result = JSON.createObjectNode();
        try (ResponseConnection connection = client.responses().connect()) {
            List<ResponseConnection.Lane> lanes = new ArrayList<>();
            for (String sku : skus) lanes.add(connection.lane("lane-" + sku));
            // Both lanes' first creates go out before either answer is read: they play at once.
            for (int i = 0; i < skus.length; i++) {
                send(
                        lanes.get(i),
                        ResponsesClientEvent.ofResponseCreate(
                                        ResponsesClientEvent.ResponseCreate.builder()
                                                .model(MODEL)
                                                .store(false)
                                                .input("Compare inventory with demand for " + skus[i] + ".")
                                                .tools(TOOLS)
                                                .build()));
            }
            for (int i = 0; i < skus.length; i++) {
                ResponseConnection.Lane lane = lanes.get(i);
                ArrayNode routes = JSON.createArrayNode();
                Response response = lane.finalResponse();
                int n = 1;
                while (true) {
                    requireCompleted(response);
                    routes.add(types(response.output()));
                    List<ResponseFunctionToolCall> calls = calls(response);
                    if (calls.isEmpty() && message(response).isPresent()) break;
                    if (++n > MAX_RESPONSES) throw new IllegalStateException("no final message");
                    // store:false continues by previous_response_id on the socket that made it.
                    ResponsesClientEvent.ResponseCreate.Builder next =
                            ResponsesClientEvent.ResponseCreate.builder()
                                    .model(MODEL)
                                    .store(false)
                                    .previousResponseId(response.id())
                                    .tools(TOOLS);
                    List<ResponseInputItem> outputs = new ArrayList<>();
                    requireProgramCallers(calls, response);
                    for (ResponseFunctionToolCall call : calls) outputs.add(output(call));
                    next.inputOfResponse(outputs);
                    send(lane, ResponsesClientEvent.ofResponseCreate(next.build()));
                    response = lane.finalResponse();
                }
                ObjectNode laneResult = JSON.createObjectNode();
                laneResult.put("answer", message(response).get());
                laneResult.put("responses", n);
                laneResult.set("routes", routes);
                result.set(skus[i], laneResult);
                lane.close();
            }
        }
        return result;
    }

    // ---- 5. compaction: a paused program's window compacted, resumed from the compacted output --

    ObjectNode compaction() throws Exception {
        List<ResponseInputItem> items = new ArrayList<>(List.of(user(TASK)));
        Response first = client.responses().create(create(items).build());
        requireCompleted(first);
        for (ResponseOutputItem item : first.output()) items.add(replay(item));
        List<ResponseFunctionToolCall> calls = calls(first);
        if (calls.isEmpty()) throw new IllegalStateException("the program did not pause");
        CompactedResponse compacted =
                client.responses()
                        .compact(ResponseCompactParams.builder().model(MODEL).inputOfResponseInputItems(items).build());
        // The compacted output stands for the whole window: send all of it, then what is new.
        List<ResponseInputItem> next = new ArrayList<>();
        for (ResponseOutputItem item : compacted.output()) next.add(replay(item));
        requireProgramCallers(calls, first);
        for (ResponseFunctionToolCall call : calls) next.add(output(call));
        Response resumed = client.responses().create(create(next).build());
        requireCompleted(resumed);
        ObjectNode result = JSON.createObjectNode();
        result.set("compacted_output", types(compacted.output()));
        result.put("compacted_object", compacted._object_().asStringOrThrow());
        result.put("compacted_input_tokens", compacted.usage().inputTokens());
        result.set("sent", types(next));
        result.set("route", types(resumed.output()));
        result.put("answer", message(resumed).orElse(null));
        return result;
    }

    /**
     * Compaction on create: with {@code context_management} and a threshold every request passes,
     * each response starts with a compaction item standing for the context before it; the loop
     * replays it with the rest and the paused program still resumes.
     */
    ObjectNode contextCompaction() throws Exception {
        return replayLoop(
                items ->
                        client.responses()
                                .create(
                                        create(items)
                                                .addContextManagement(
                                                        ResponseCreateParams.ContextManagement.builder()
                                                                .type("compaction")
                                                                .compactThreshold(1L)
                                                                .build())
                                                .build()));
    }

    // ---- 6. a conversation: responses bound to it, then its items listed -----------------------

    ObjectNode conversation() throws Exception {
        Conversation conversation =
                client.conversations()
                        .create(
                                ConversationCreateParams.builder()
                                        .metadata(
                                                ConversationCreateParams.Metadata.builder()
                                                        .putAdditionalProperty("flow", JsonValue.from("java"))
                                                        .build())
                                        .build());
        Response response =
                client.responses()
                        .create(
                                ResponseCreateParams.builder()
                                        .model(MODEL)
                                        .conversation(conversation.id())
                                        .input(TASK)
                                        .tools(TOOLS)
                                        .build());
        ArrayNode routes = JSON.createArrayNode();
        for (int n = 1; ; n++) {
            requireCompleted(response);
            routes.add(types(response.output()));
            List<ResponseFunctionToolCall> calls = calls(response);
            if (calls.isEmpty() && message(response).isPresent()) break;
            if (n >= MAX_RESPONSES) throw new IllegalStateException("no final message");
            requireProgramCallers(calls, response);
            List<ResponseInputItem> outputs = new ArrayList<>();
            for (ResponseFunctionToolCall call : calls) outputs.add(output(call));
            response =
                    client.responses()
                            .create(
                                    ResponseCreateParams.builder()
                                            .model(MODEL)
                                            .conversation(conversation.id())
                                            .inputOfResponse(outputs)
                                            .tools(TOOLS)
                                            .build());
        }
        List<ConversationItem> listed = new ArrayList<>();
        client.conversations()
                .items()
                .list(
                        ItemListParams.builder()
                                .conversationId(conversation.id())
                                .order(ItemListParams.Order.ASC)
                                .limit(3)
                                .build())
                .autoPager()
                .forEach(listed::add);
        ObjectNode result = JSON.createObjectNode();
        result.put("conversation", conversation.id());
        result.put("answer", message(response).orElse(null));
        result.set("routes", routes);
        result.put("response_conversation", response.conversation().map(c -> c.id()).orElse(null));
        result.set("items", types(listed));
        result.put(
                "metadata", client.conversations().retrieve(conversation.id())._metadata().toString());
        return result;
    }

    // ---- 7. the Agents API function-tool flow of the guide ----------------------------------------

    static final PersistedAgentToolParam GET_CUSTOMER =
            PersistedAgentToolParam.ofFunction(
                    PersistedAgentToolParam.Function.builder()
                            .name("get_customer")
                            .description("Look up a customer by ID.")
                            .parameters(
                                    PersistedAgentToolParam.Function.Parameters.builder()
                                            .putAdditionalProperty("type", JsonValue.from("object"))
                                            .putAdditionalProperty(
                                                    "properties",
                                                    JsonValue.from(Map.of("customer_id", Map.of("type", "string"))))
                                            .putAdditionalProperty("required", JsonValue.from(List.of("customer_id")))
                                            .putAdditionalProperty("additionalProperties", JsonValue.from(false))
                                            .build())
                            .build());

    /** Reads the session's events until one `until` accepts; returns it. */
    AgentSessionEvent follow(String sessionId, Function<AgentSessionEvent, Boolean> until, List<String> seen) {
        try (StreamResponse<AgentSessionEvent> events =
                client.beta().agents().sessions().events().streamStreaming(sessionId)) {
            for (AgentSessionEvent event : (Iterable<AgentSessionEvent>) events.stream()::iterator) {
                seen.add(JSON.valueToTree(event).path("type").asText());
                if (until.apply(event)) return event;
            }
        }
        throw new IllegalStateException("the session's event stream ended early: " + seen);
    }

    ObjectNode agents() throws Exception {
        Agent agent =
                client.beta()
                        .agents()
                        .create(AgentCreateParams.builder().name("customer-lookup").model("gpt-5").addTool(GET_CUSTOMER).build());
        AgentSession session =
                client.beta()
                        .agents()
                        .sessions()
                        .create(
                                SessionCreateParams.builder()
                                        .agentId(agent.id())
                                        .environmentNone()
                                        .input("Look up customer 123.")
                                        .build());
        String sessionId = session.id();
        List<String> seen = new ArrayList<>();
        AgentSessionEvent requiresAction = follow(sessionId, AgentSessionEvent::isRequiresAction, seen);
        var json = new JsonMapper();
        int answered = 0;
        for (AgentSession.RequiredAction required : requiresAction.asRequiresAction().session().requiredActions()) {
            var action = required.asFunctionCall();
            // The guide's Java code, as written.
            var result =
                    AgentSessionInputParam.AgentSessionInputToolResult.builder()
                            .turnId(action.turnId())
                            .callId(action.callId());
            var arguments = json.valueToTree(action._arguments());

            boolean found = ((JsonNode) arguments).path("customer_id").asText().equals("123");
            var output = json.createObjectNode().put("found", found);
            if (found) output.putObject("customer").put("name", "Example Customer").put("plan", "pro");
            else output.putNull("customer");
            result.success(true).output(json.writeValueAsString(output));

            client.beta()
                    .agents()
                    .sessions()
                    .events()
                    .create(EventCreateParams.builder().sessionId(sessionId).addEvent(result.build()).build());
            answered++;
        }
        seen.add("|");
        follow(sessionId, AgentSessionEvent::isIdle, seen);
        AgentSession finished = client.beta().agents().sessions().retrieve(sessionId);
        List<AgentSessionItem> items = new ArrayList<>();
        client.beta().agents().sessions().items().list(sessionId).autoPager().forEach(items::add);
        List<Turn> turns = new ArrayList<>();
        client.beta().agents().sessions().turns().list(sessionId).autoPager().forEach(turns::add);
        String answer = null;
        for (AgentSessionItem item : items) {
            JsonNode tree = JSON.valueToTree(item);
            if (tree.path("type").asText().equals("message") && tree.path("role").asText().equals("assistant")) {
                answer = tree.path("content").path(0).path("text").asText();
            }
        }
        ObjectNode result = JSON.createObjectNode();
        result.put("agent", agent.id());
        result.put("session", sessionId);
        result.put("session_agent", finished.agent().id());
        result.put("answered", answered);
        result.put("status", finished.status().asString());
        result.put("required_actions_after", finished.requiredActions().size());
        result.put("answer", answer);
        result.set("items", types(items));
        ArrayNode turnStatuses = JSON.createArrayNode();
        for (Turn turn : turns) turnStatuses.add(JSON.valueToTree(turn).path("status").asText());
        result.set("turns", turnStatuses);
        result.set("events", JSON.valueToTree(seen));
        return result;
    }
}
