// A scripted OpenAI-compatible chat-completions server for driving the real OpenCode binary.
// It records every request body, answers OpenCode's internal agents (title generator, compaction
// agent) on its own, and plays a per-test script of steps for the main agent's requests.

export type ChatContentPart = { type: string; text?: string };

export type ChatToolCall = {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
};

export type ChatMessage = {
  role: "system" | "user" | "assistant" | "tool";
  content?: string | ChatContentPart[] | null;
  tool_calls?: ChatToolCall[];
  tool_call_id?: string;
};

export type ChatRequestBody = {
  model?: string;
  messages: ChatMessage[];
  tools?: { type: string; function: { name: string } }[];
  stream?: boolean;
};

/** Which of OpenCode's agents sent a request, told from the start of its first system message. */
export type RequestKind = "main" | "title" | "compaction";

export type RecordedRequest = {
  /** 0-based position among all chat requests this server received. */
  index: number;
  kind: RequestKind;
  body: ChatRequestBody;
};

export type ToolCallStep = { tool: string; args: Record<string, unknown> };

export type Step = {
  /** Tool calls to make; when empty or absent the step is a final text answer. */
  toolCalls?: ToolCallStep[];
  text?: string;
  /** Reported `usage.prompt_tokens`; a large value makes OpenCode compact afterwards. */
  promptTokens?: number;
};

/** A step may be computed from the request it answers, so a test can act (edit files) in between. */
export type ScriptStep = Step | ((request: RecordedRequest) => Step | Promise<Step>);

export type Script = {
  /** Which main-agent requests this script answers; the first script that matches and has steps left wins. */
  matches?: (request: RecordedRequest) => boolean;
  steps: ScriptStep[];
};

export const TITLE_SYSTEM_PREFIX = "You are a title generator";
export const COMPACTION_SYSTEM_PREFIX = "You are a context summarization agent";

/** Answer given to main-agent requests that no script covers; tests can assert it never shows. */
export const UNSCRIPTED_REPLY = "(model-server: no scripted step left)";

export function textOf(content: ChatMessage["content"]): string {
  if (typeof content === "string") return content;
  if (!content) return "";
  return content.map((part) => part.text ?? "").join("");
}

export function systemMessages(body: ChatRequestBody): string[] {
  return body.messages.filter((message) => message.role === "system").map((message) => textOf(message.content));
}

export function classifyRequest(body: ChatRequestBody): RequestKind {
  const firstSystem = systemMessages(body)[0] ?? "";
  if (firstSystem.startsWith(TITLE_SYSTEM_PREFIX)) return "title";
  if (firstSystem.startsWith(COMPACTION_SYSTEM_PREFIX)) return "compaction";
  return "main";
}

/** Text of the first user message: how a multi-session test tells its sessions apart. */
export function firstUserText(body: ChatRequestBody): string {
  const firstUser = body.messages.find((message) => message.role === "user");
  return firstUser ? textOf(firstUser.content) : "";
}

export type ModelServer = {
  /** e.g. http://127.0.0.1:PORT/v1 — the provider's baseURL. */
  baseURL: string;
  requests: RecordedRequest[];
  /** Main-agent requests only, in arrival order. */
  mainRequests(): RecordedRequest[];
  /** Queue a script; scripts are tried in the order they were added. */
  play(script: Script | ScriptStep[]): void;
  /** Main-agent requests that found no script step and got UNSCRIPTED_REPLY. */
  unscriptedCount(): number;
  /** Script steps not played yet. */
  pendingSteps(): number;
  /** Errors thrown by step functions, kept so the test can report them instead of hanging. */
  stepErrors: unknown[];
  /** Resolves once `predicate` holds over the recorded requests, or rejects after `timeoutMs`. */
  waitFor(predicate: (requests: RecordedRequest[]) => boolean, timeoutMs: number, what: string): Promise<void>;
  stop(): Promise<void>;
};

const MODEL_NAME = "m1";
const TITLE_REPLY = "Scripted session";
const COMPACTION_REPLY = "Summary: the scripted conversation so far.";

export function startModelServer(): ModelServer {
  const requests: RecordedRequest[] = [];
  const scripts: Script[] = [];
  const stepErrors: unknown[] = [];
  const waiters = new Set<() => void>();
  let unscripted = 0;
  let toolCallCounter = 0;

  const notifyWaiters = () => {
    for (const check of waiters) check();
  };

  const nextStepFor = (request: RecordedRequest): ScriptStep | undefined => {
    const script = scripts.find((candidate) => candidate.steps.length > 0 && (candidate.matches?.(request) ?? true));
    return script?.steps.shift();
  };

  const stepFor = async (request: RecordedRequest): Promise<Step> => {
    if (request.kind === "title") return { text: TITLE_REPLY };
    if (request.kind === "compaction") return { text: COMPACTION_REPLY };
    const scripted = nextStepFor(request);
    if (scripted === undefined) {
      unscripted += 1;
      return { text: UNSCRIPTED_REPLY };
    }
    if (typeof scripted !== "function") return scripted;
    try {
      return await scripted(request);
    } catch (error) {
      stepErrors.push(error);
      return { text: `(model-server: step failed: ${String(error)})` };
    }
  };

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    // Step functions may wait on the file system; never let Bun cut a slow stream.
    idleTimeout: 0,
    async fetch(httpRequest) {
      const url = new URL(httpRequest.url);
      if (httpRequest.method !== "POST" || !url.pathname.endsWith("/chat/completions")) {
        return new Response("not found", { status: 404 });
      }
      const body = (await httpRequest.json()) as ChatRequestBody;
      const recorded: RecordedRequest = { index: requests.length, kind: classifyRequest(body), body };
      requests.push(recorded);
      // Waiters see a request as soon as it arrives: a step may wait for another session's request.
      notifyWaiters();
      const step = await stepFor(recorded);
      const chunks = completionChunks(step, () => `call_${++toolCallCounter}`);
      if (body.stream === false) return Response.json(nonStreamingCompletion(chunks));
      const sse = chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`).join("") + "data: [DONE]\n\n";
      return new Response(sse, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
    },
  });

  return {
    baseURL: `http://127.0.0.1:${server.port}/v1`,
    requests,
    mainRequests: () => requests.filter((request) => request.kind === "main"),
    play(script) {
      scripts.push(Array.isArray(script) ? { steps: [...script] } : { ...script, steps: [...script.steps] });
    },
    unscriptedCount: () => unscripted,
    pendingSteps: () => scripts.reduce((count, script) => count + script.steps.length, 0),
    stepErrors,
    waitFor(predicate, timeoutMs, what) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (!predicate(requests)) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`model server: timed out after ${timeoutMs} ms waiting for ${what}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    async stop() {
      await server.stop(true);
    },
  };
}

type CompletionChunk = {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: { index: number; delta: Record<string, unknown>; finish_reason: string | null }[];
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
};

function completionChunks(step: Step, nextCallId: () => string): CompletionChunk[] {
  const base = { id: "chatcmpl-scripted", object: "chat.completion.chunk" as const, created: 0, model: MODEL_NAME };
  const toolCalls = step.toolCalls ?? [];
  const deltas: Record<string, unknown>[] = [];
  if (step.text !== undefined) deltas.push({ role: "assistant", content: step.text });
  toolCalls.forEach((call, index) => {
    deltas.push({
      ...(index === 0 && deltas.length === 0 ? { role: "assistant" } : {}),
      tool_calls: [
        { index, id: nextCallId(), type: "function", function: { name: call.tool, arguments: JSON.stringify(call.args) } },
      ],
    });
  });
  if (deltas.length === 0) deltas.push({ role: "assistant", content: "" });
  const promptTokens = step.promptTokens ?? 100;
  const finishReason = toolCalls.length > 0 ? "tool_calls" : "stop";
  return [
    ...deltas.map((delta) => ({ ...base, choices: [{ index: 0, delta, finish_reason: null }] })),
    {
      ...base,
      choices: [{ index: 0, delta: {}, finish_reason: finishReason }],
      usage: { prompt_tokens: promptTokens, completion_tokens: 10, total_tokens: promptTokens + 10 },
    },
  ];
}

/** The same answer as one JSON body, for callers that ask with `stream: false`. */
function nonStreamingCompletion(chunks: CompletionChunk[]) {
  const content = chunks.map((chunk) => chunk.choices[0]?.delta["content"] ?? "").join("");
  const toolCalls = chunks.flatMap((chunk) => (chunk.choices[0]?.delta["tool_calls"] as unknown[] | undefined) ?? []);
  const last = chunks[chunks.length - 1];
  return {
    id: "chatcmpl-scripted",
    object: "chat.completion",
    created: 0,
    model: MODEL_NAME,
    choices: [
      {
        index: 0,
        message: { role: "assistant", content, ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}) },
        finish_reason: last?.choices[0]?.finish_reason ?? "stop",
      },
    ],
    usage: last?.usage,
  };
}
