// A context file edited, created or deleted between two steps, by the test or by the agent's own
// tools, shows in the very next request.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { appendFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { assertRunSucceeded, openScenario, type Scenario } from "./harness.ts";
import type { RecordedRequest, Step } from "./model-server.ts";
import { API } from "./monorepo.ts";
import { contextBlock, contextFilePaths, nth } from "./requests.ts";

const CREATED = { path: "packages/api/src/AGENTS.md", text: "CREATED-BY-TEST: src rules." };
const WRITTEN = { path: "packages/api/src/handlers/AGENTS.md", text: "WRITTEN-BY-AGENT: handler rules." };
const EDITED_BY_TEST = "EDITED-BY-TEST: appended rule.";
const EDITED_BY_AGENT = "EDITED-BY-AGENT: replaced rule.";

let scenario: Scenario;
let main: RecordedRequest[] = [];

beforeAll(async () => {
  scenario = openScenario({ plugin: { via: "config" } });
  const dir = scenario.project.dir;
  const at = (path: string) => join(dir, path);
  // A step that touches nothing with context, for the steps where the test itself changes files.
  const readGuide: Step = { toolCalls: [{ tool: "read", args: { filePath: at("docs/guide.md") } }] };
  const afterTestChange = (change: () => void) => () => {
    change();
    return readGuide;
  };

  scenario.server.play([
    { toolCalls: [{ tool: "read", args: { filePath: at("packages/api/src/handlers/users.ts") } }] },
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
  const result = await scenario.project.run("keep the rules fresh");
  assertRunSucceeded(result, scenario.server, "freshness run");
  main = scenario.server.mainRequests();
}, 120_000);

afterAll(async () => {
  await scenario.close();
});

const blockOf = (position: number): string => contextBlock(nth(main, position)) ?? "";
const filesOf = (position: number): string[] => contextFilePaths(nth(main, position));

describe("freshness", () => {
  test("every step got a request", () => {
    expect(main).toHaveLength(8);
  });

  test("an edit by the test shows in the very next request", () => {
    expect(blockOf(1)).toContain(API.marker);
    expect(blockOf(1)).not.toContain(EDITED_BY_TEST);
    expect(blockOf(2)).toContain(EDITED_BY_TEST);
  });

  test("a context file created by the test joins the very next request, between its parent and the touched path", () => {
    expect(filesOf(3)).toEqual([API.path, CREATED.path]);
    expect(blockOf(3)).toContain(CREATED.text);
  });

  test("a context file deleted by the test is gone from the very next request", () => {
    expect(filesOf(3)).toContain(CREATED.path);
    expect(filesOf(4)).toEqual([API.path]);
    expect(blockOf(4)).not.toContain(CREATED.text);
  });

  test("the agent's own edit of a context file shows in the very next request", () => {
    expect(blockOf(4)).toContain(EDITED_BY_TEST);
    expect(blockOf(5)).toContain(EDITED_BY_AGENT);
    expect(blockOf(5)).not.toContain(EDITED_BY_TEST);
  });

  test("a context file the agent writes joins the very next request", () => {
    expect(filesOf(6)).toEqual([API.path, WRITTEN.path]);
    expect(blockOf(6)).toContain(WRITTEN.text);
  });

  test("a context file the agent deletes through bash is gone from the very next request", () => {
    expect(filesOf(6)).toContain(WRITTEN.path);
    expect(filesOf(7)).toEqual([API.path]);
    expect(blockOf(7)).not.toContain(WRITTEN.text);
  });
});
