// A context file edited, created or deleted, by the test or by the agent's own tools, reaches the
// model at once (stable delivery, the default): a change made between two steps rides on the next
// tool output, as the file's new text marked status="updated" (or a deletion notice); a change made
// between two user messages rides on the next user message. The system prompt never moves.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { appendFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { assertRunSucceeded, assertScriptPlayed, openScenario, type Scenario } from "./harness.ts";
import { firstUserText, systemMessages, type RecordedRequest, type Step } from "./model-server.ts";
import { API } from "./monorepo.ts";
import { lastToolOutput, nth, occurrences, placesOf, sectionPaths, userTexts } from "./requests.ts";

const CREATED = { path: "packages/api/src/AGENTS.md", text: "CREATED-BY-TEST: src rules." };
const WRITTEN = { path: "packages/api/src/handlers/AGENTS.md", text: "WRITTEN-BY-AGENT: handler rules." };
const EDITED_BY_TEST = "EDITED-BY-TEST: appended rule.";
const EDITED_BY_AGENT = "EDITED-BY-AGENT: replaced rule.";
const EDITED_BETWEEN_MESSAGES = "EDITED-BETWEEN-MESSAGES: a rule saved in the editor.";
const UPDATED_API = `<context-file path="${API.path}" status="updated">`;

let steps: Scenario;
let messages: Scenario;
let main: RecordedRequest[] = [];
/** The plugin's start line in OpenCode's log: it names the watcher the plugin got inside the real binary. */
let startLine = "";
let secondMessage: RecordedRequest[] = [];

async function runStepEdits() {
  steps = openScenario({ plugin: { via: "config" } });
  const dir = steps.project.dir;
  const at = (path: string) => join(dir, path);
  // A step that touches nothing with context, for the steps where the test itself changes files.
  const readGuide: Step = { toolCalls: [{ tool: "read", args: { filePath: at("docs/guide.md") } }] };
  const afterTestChange = (change: () => void) => () => {
    change();
    return readGuide;
  };
  steps.server.play([
    // Bash reaches packages/api: the plugin delivers its file (a read would get OpenCode's reminder).
    { toolCalls: [{ tool: "bash", args: { command: "ls", workdir: at("packages/api/src/handlers"), description: "List handlers" } }] },
    afterTestChange(() => appendFileSync(at(API.path), `${EDITED_BY_TEST}\n`)),
    afterTestChange(() => {
      mkdirSync(at("packages/api/src"), { recursive: true });
      writeFileSync(at(CREATED.path), `# Src\n${CREATED.text}\n`);
    }),
    afterTestChange(() => rmSync(at(CREATED.path))),
    { toolCalls: [{ tool: "edit", args: { filePath: at(API.path), oldString: EDITED_BY_TEST, newString: EDITED_BY_AGENT } }] },
    { toolCalls: [{ tool: "write", args: { filePath: at(WRITTEN.path), content: `# Handlers\n${WRITTEN.text}\n` } }] },
    {
      toolCalls: [
        { tool: "bash", args: { command: "rm src/handlers/AGENTS.md", workdir: at("packages/api"), description: "Remove handler rules" } },
      ],
    },
    { text: "done" },
  ]);
  const result = await steps.project.run("keep the rules fresh");
  assertRunSucceeded(result, steps.server, "freshness run");
  main = steps.server.mainRequests();
  startLine = result.stderr.split("\n").find((line) => line.includes("project-context") && line.includes(" started: ")) ?? "";
}

async function runMessageEdit() {
  messages = openScenario({ plugin: { via: "config" } });
  const { server, project } = messages;
  const dir = project.dir;
  server.play({
    matches: (request) => userTexts(request).length === 1,
    steps: [{ toolCalls: [{ tool: "bash", args: { command: "ls", workdir: `${dir}/packages/api/src/handlers`, description: "List handlers" } }] }, { text: "first done" }],
  });
  server.play({ matches: (request) => userTexts(request).length > 1, steps: [{ text: "second done" }] });
  const opencode = await project.serve();
  try {
    const session = await opencode.createSession();
    await opencode.prompt(session, "first message");
    appendFileSync(join(dir, API.path), `${EDITED_BETWEEN_MESSAGES}\n`);
    await opencode.prompt(session, "second message");
  } finally {
    await opencode.stop();
  }
  assertScriptPlayed(server, "two user messages");
  secondMessage = server.mainRequests().filter((request) => userTexts(request).length > 1 && firstUserText(request.body).includes("first message"));
}

beforeAll(async () => {
  await Promise.all([runStepEdits(), runMessageEdit()]);
}, 120_000);

afterAll(async () => {
  await Promise.all([steps?.close(), messages?.close()]);
});

/** The notice that a delivered file is gone: a line of its own naming the file, saying its rules no longer apply. */
const goneNotice = (path: string) => new RegExp(`\\n\\["${path.replaceAll(".", "\\.")}" [^\\]\\n]*no longer appl[^\\]\\n]*\\]\\n`);

const outputOf = (position: number): string => lastToolOutput(nth(main, position));

describe("freshness between steps", () => {
  test.skipIf(process.platform !== "linux")("inside the opencode binary the watcher is inotify, read through bun:ffi (not the fs.watch fallback)", () => {
    expect(startLine).toContain("watcher inotify");
  });

  test("every step got a request, and no request has a block in its system prompt", () => {
    expect(main).toHaveLength(8);
    for (const request of main) expect(systemMessages(request.body)).toHaveLength(1);
  });

  test("an edit by the test shows in the next tool output, as the file's new text marked updated", () => {
    expect(sectionPaths(outputOf(1))).toEqual([API.path]);
    expect(outputOf(1)).not.toContain(EDITED_BY_TEST);
    expect(outputOf(2)).toContain(UPDATED_API);
    expect(outputOf(2)).toContain(EDITED_BY_TEST);
    expect(placesOf(nth(main, 2), EDITED_BY_TEST)).toEqual(["tool"]);
  });

  test("a context file created by the test rides on the next tool output", () => {
    expect(sectionPaths(outputOf(3))).toEqual([CREATED.path]);
    expect(outputOf(3)).toContain(CREATED.text);
  });

  test("a context file deleted by the test is announced on the next tool output", () => {
    expect(outputOf(4)).toMatch(goneNotice(CREATED.path));
    expect(sectionPaths(outputOf(4))).toEqual([]);
  });

  test("the agent's own edit of a context file rides on that edit's output", () => {
    expect(outputOf(5)).toContain(UPDATED_API);
    expect(outputOf(5)).toContain(EDITED_BY_AGENT);
    expect(outputOf(5)).not.toContain(EDITED_BY_TEST);
  });

  test("a context file the agent writes rides on that write's output", () => {
    expect(sectionPaths(outputOf(6))).toEqual([WRITTEN.path]);
    expect(outputOf(6)).toContain(WRITTEN.text);
  });

  test("a context file the agent deletes through bash is announced on that command's output", () => {
    expect(outputOf(7)).toMatch(goneNotice(WRITTEN.path));
    expect(sectionPaths(outputOf(7))).toEqual([]);
  });

  test("nothing is sent twice: each version of each file reaches the model once", () => {
    const last = nth(main, 7);
    for (const text of [EDITED_BY_TEST, EDITED_BY_AGENT, CREATED.text, WRITTEN.text]) expect({ text, count: occurrences(last, text) }).toEqual({ text, count: 1 });
  });
});

describe("freshness between user messages", () => {
  test("an edit made between two user messages rides on the next user message, once", () => {
    expect(secondMessage).toHaveLength(1);
    const request = nth(secondMessage, 0);
    expect(placesOf(request, EDITED_BETWEEN_MESSAGES)).toEqual(["user"]);
    const carrier = userTexts(request).find((text) => text.includes(EDITED_BETWEEN_MESSAGES)) ?? "";
    expect(carrier).toContain(UPDATED_API);
    expect(systemMessages(request.body)).toHaveLength(1);
  });
});
