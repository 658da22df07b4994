import { afterEach, describe, expect, test } from "bun:test";
import {
  COMPACTION_SYSTEM_PREFIX,
  TITLE_SYSTEM_PREFIX,
  UNSCRIPTED_REPLY,
  startModelServer,
  type ChatRequestBody,
  type ModelServer,
} from "./model-server.ts";

let server: ModelServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

function start(): ModelServer {
  server = startModelServer();
  return server;
}

const mainBody = (userText: string): ChatRequestBody => ({
  messages: [
    { role: "system", content: "You are opencode, an interactive CLI tool" },
    { role: "user", content: userText },
  ],
  stream: true,
});
const titleBody: ChatRequestBody = {
  messages: [
    { role: "system", content: `${TITLE_SYSTEM_PREFIX}. You output ONLY a thread title.` },
    { role: "user", content: "Generate a title for this conversation:\n" },
  ],
  stream: true,
};
const compactionBody: ChatRequestBody = {
  messages: [
    { role: "system", content: `${COMPACTION_SYSTEM_PREFIX}. You are given a conversation` },
    { role: "user", content: "Here is the conversation so far:" },
  ],
  stream: true,
};

type StreamedAnswer = { content: string; toolCalls: { id: string; name: string; arguments: string }[]; finishReason: string | null; promptTokens: number | undefined };

async function ask(target: ModelServer, body: ChatRequestBody): Promise<StreamedAnswer> {
  const response = await fetch(`${target.baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(response.headers.get("content-type")).toBe("text/event-stream");
  const events = (await response.text()).split("\n\n").filter((event) => event.startsWith("data: "));
  expect(events.at(-1)).toBe("data: [DONE]");
  const answer: StreamedAnswer = { content: "", toolCalls: [], finishReason: null, promptTokens: undefined };
  for (const event of events.slice(0, -1)) {
    const chunk = JSON.parse(event.slice("data: ".length));
    const choice = chunk.choices[0];
    answer.content += choice.delta.content ?? "";
    for (const call of choice.delta.tool_calls ?? []) {
      answer.toolCalls.push({ id: call.id, name: call.function.name, arguments: call.function.arguments });
    }
    answer.finishReason = choice.finish_reason ?? answer.finishReason;
    answer.promptTokens = chunk.usage?.prompt_tokens ?? answer.promptTokens;
  }
  return answer;
}

describe("scripted model server", () => {
  test("streams a tool-call step as OpenAI chunks ending in finish_reason tool_calls", async () => {
    const target = start();
    target.play([{ toolCalls: [{ tool: "read", args: { filePath: "/p/a.ts" } }, { tool: "glob", args: { pattern: "*" } }] }]);
    const answer = await ask(target, mainBody("go"));
    expect(answer.finishReason).toBe("tool_calls");
    expect(answer.toolCalls.map((call) => call.name)).toEqual(["read", "glob"]);
    expect(JSON.parse(answer.toolCalls[0]?.arguments ?? "")).toEqual({ filePath: "/p/a.ts" });
    expect(new Set(answer.toolCalls.map((call) => call.id)).size).toBe(2);
  });

  test("a text step ends with finish_reason stop and the reported usage", async () => {
    const target = start();
    target.play([{ text: "all done", promptTokens: 19_500 }]);
    const answer = await ask(target, mainBody("go"));
    expect(answer).toMatchObject({ content: "all done", finishReason: "stop", promptTokens: 19_500, toolCalls: [] });
  });

  test("title and compaction requests are recorded and answered without consuming script steps", async () => {
    const target = start();
    target.play([{ text: "first main answer" }]);
    const title = await ask(target, titleBody);
    const compaction = await ask(target, compactionBody);
    const main = await ask(target, mainBody("go"));
    expect(title.content).not.toBe("");
    expect(compaction.content).not.toBe("");
    expect(main.content).toBe("first main answer");
    expect(target.requests.map((request) => request.kind)).toEqual(["title", "compaction", "main"]);
    expect(target.mainRequests().map((request) => request.index)).toEqual([2]);
    expect(target.requests[0]?.body).toEqual(titleBody);
  });

  test("a step function sees the request it answers and may act before answering", async () => {
    const target = start();
    const seen: number[] = [];
    target.play([
      { text: "one" },
      async (request) => {
        seen.push(request.index);
        await Bun.sleep(1);
        return { text: `answered request ${request.index}` };
      },
    ]);
    await ask(target, mainBody("go"));
    expect(target.pendingSteps()).toBe(1);
    expect((await ask(target, mainBody("go"))).content).toBe("answered request 1");
    expect(seen).toEqual([1]);
    expect(target.pendingSteps()).toBe(0);
  });

  test("a failing step function is reported, not hung on", async () => {
    const target = start();
    target.play([
      () => {
        throw new Error("boom");
      },
    ]);
    const answer = await ask(target, mainBody("go"));
    expect(answer.finishReason).toBe("stop");
    expect(String(target.stepErrors[0])).toContain("boom");
  });

  test("scripts with a matcher answer only their own session's requests", async () => {
    const target = start();
    target.play({ matches: (request) => JSON.stringify(request.body).includes("alpha"), steps: [{ text: "for alpha" }] });
    target.play({ matches: (request) => JSON.stringify(request.body).includes("beta"), steps: [{ text: "for beta" }] });
    expect((await ask(target, mainBody("beta task"))).content).toBe("for beta");
    expect((await ask(target, mainBody("alpha task"))).content).toBe("for alpha");
  });

  test("requests past the end of the script get a recognisable reply and are counted", async () => {
    const target = start();
    expect((await ask(target, mainBody("go"))).content).toBe(UNSCRIPTED_REPLY);
    expect(target.unscriptedCount()).toBe(1);
  });

  test("answers a non-streaming request with one JSON completion", async () => {
    const target = start();
    target.play([{ toolCalls: [{ tool: "read", args: { filePath: "/p/a.ts" } }] }]);
    const response = await fetch(`${target.baseURL}/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ ...mainBody("go"), stream: false }),
    });
    const completion = (await response.json()) as {
      choices: { finish_reason: string; message: { tool_calls: { function: { name: string } }[] } }[];
    };
    expect(completion.choices[0]?.finish_reason).toBe("tool_calls");
    expect(completion.choices[0]?.message.tool_calls[0]?.function.name).toBe("read");
  });

  test("waitFor resolves once the condition holds and rejects after its bound", async () => {
    const target = start();
    target.play([{ text: "x" }]);
    const waiting = target.waitFor((requests) => requests.length === 1, 2_000, "one request");
    await ask(target, mainBody("go"));
    await waiting;
    await expect(target.waitFor((requests) => requests.length === 5, 50, "five requests")).rejects.toThrow(
      "timed out after 50 ms waiting for five requests",
    );
  });

  test("other paths answer 404", async () => {
    const target = start();
    expect((await fetch(`${target.baseURL}/models`)).status).toBe(404);
  });
});
