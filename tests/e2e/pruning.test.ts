// OpenCode's `compaction.prune`: after a turn, old tool outputs beyond the newest ~40k estimated
// tokens (the last 2 user turns protected) are cleared when that frees over 20k, and the model then
// sees "[Old tool result content cleared]" instead. A cleared output that carried a context file sends
// that file back: the next system block holds it, so it never goes missing.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { assertScriptPlayed, openScenario, type Scenario } from "./harness.ts";
import { systemMessages, type RecordedRequest, type ToolCallStep } from "./model-server.ts";
import { API } from "./monorepo.ts";
import { contextBlock, contextFilePaths, placesOf, sectionPaths, toolOutputs, userTexts } from "./requests.ts";

const CLEARED = "[Old tool result content cleared]";
/** Six outputs of ~50 KB (~12.5k estimated tokens each): well past what pruning keeps and frees. */
const BULK_CALLS = 6;
const TURNS = 4;

let scenario: Scenario;
let main: RecordedRequest[] = [];

beforeAll(async () => {
  scenario = openScenario({ plugin: { via: "config" } });
  const { server, project } = scenario;
  const dir = project.dir;
  const configPath = join(dir, "opencode.json");
  writeFileSync(configPath, JSON.stringify({ ...JSON.parse(readFileSync(configPath, "utf8")), compaction: { prune: true } }, null, 2));
  writeFileSync(join(dir, "docs/bulk.txt"), "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklm\n".repeat(800));
  // Distinct commands: OpenCode asks before a third identical call (its doom-loop guard), and no one answers here.
  const bulk = (n: number): ToolCallStep => ({
    tool: "bash",
    args: { command: `cat bulk.txt && echo ${n}`, workdir: `${dir}/docs`, description: `Print part ${n}` },
  });
  server.play({
    matches: (request) => userTexts(request).length === 1,
    steps: [
      // This output carries packages/api's file; the bulky ones after it keep it out of the protected newest 40k.
      { toolCalls: [{ tool: "bash", args: { command: "ls", workdir: `${dir}/packages/api/src/handlers`, description: "List" } }] },
      { toolCalls: Array.from({ length: BULK_CALLS }, (_, n) => bulk(n)) },
      { text: "turn 1 done" },
    ],
  });
  for (let turn = 2; turn <= TURNS; turn++) server.play({ matches: (request) => userTexts(request).length === turn, steps: [{ text: `turn ${turn} done` }] });
  const opencode = await project.serve();
  try {
    const session = await opencode.createSession();
    for (let turn = 1; turn <= TURNS; turn++) await opencode.prompt(session, `turn ${turn}`);
  } catch (error) {
    const seen = server.requests.map((request) => `#${request.index} ${request.kind}, ${userTexts(request).length} user messages`);
    throw new Error(`pruning session stopped: ${String(error)}; requests: ${seen.join("; ")}`);
  } finally {
    await opencode.stop();
  }
  assertScriptPlayed(server, "pruning session");
  main = server.mainRequests();
}, 120_000);

afterAll(async () => {
  await scenario.close();
});

const carrierCleared = (request: RecordedRequest) => toolOutputs(request)[0] === CLEARED;

describe("a pruned tool output", () => {
  test("OpenCode pruned the output that carried the file within the session (after turn 3: turns 2 and 3 protected)", () => {
    expect(main).toHaveLength(TURNS + 2);
    expect(main.map(carrierCleared)).toEqual([false, false, false, false, false, true]);
    expect(sectionPaths(toolOutputs(main[1]!)[0] ?? "")).toEqual([API.path]);
    expect(main.some(carrierCleared)).toBe(true);
  });

  test("before the prune the file rides on the tool output and the system prompt is OpenCode's alone", () => {
    for (const request of main.filter((request) => !carrierCleared(request)).slice(1)) {
      expect(placesOf(request, API.marker)).toEqual(["tool"]);
      expect(systemMessages(request.body)).toHaveLength(1);
    }
  });

  test("from the first request after the prune on, the system block holds the file, once, byte-identical", () => {
    const after = main.filter(carrierCleared);
    const block = contextBlock(after[0]!);
    expect(contextFilePaths(after[0]!)).toEqual([API.path]);
    for (const request of after) {
      expect(placesOf(request, API.marker)).toEqual(["system"]);
      expect(contextBlock(request)).toBe(block!);
    }
  });
});
