// Prompt-cache friendliness: OpenCode puts cache markers on the first two system messages, so our
// block must be the second one, byte-identical while nothing changed, and only grow at its end when a
// new file joins.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { assertRunSucceeded, openScenario, type Scenario } from "./harness.ts";
import { systemMessages, type RecordedRequest } from "./model-server.ts";
import { API, COMPONENTS, DEEP_SOURCE, LEGACY, WEB } from "./monorepo.ts";
import { contextBlock, contextFilePaths, nth } from "./requests.ts";

const BLOCK_CLOSE = "</project-context>";

let scenario: Scenario;
let main: RecordedRequest[] = [];

beforeAll(async () => {
  scenario = openScenario({ plugin: { via: "drop-in" } });
  const dir = scenario.project.dir;
  scenario.server.play([
    { toolCalls: [{ tool: "read", args: { filePath: `${dir}/packages/web/src/components/Button.tsx` } }] },
    // Same directories again, then a directory without context: nothing new either time.
    { toolCalls: [{ tool: "read", args: { filePath: `${dir}/${DEEP_SOURCE}` } }] },
    { toolCalls: [{ tool: "read", args: { filePath: `${dir}/docs/guide.md` } }] },
    // packages/api sorts before packages/web, yet must not be put in front of it.
    { toolCalls: [{ tool: "glob", args: { pattern: "*.ts", path: `${dir}/packages/api/src/handlers` } }] },
    { toolCalls: [{ tool: "bash", args: { command: "ls", workdir: `${dir}/packages/legacy/lib`, description: "List legacy files" } }] },
    { text: "done" },
  ]);
  const result = await scenario.project.run("work across packages");
  assertRunSucceeded(result, scenario.server, "cache run");
  main = scenario.server.mainRequests();
}, 120_000);

afterAll(async () => {
  await scenario.close();
});

function blockOf(position: number): string {
  const block = contextBlock(nth(main, position));
  if (block === undefined) throw new Error(`main request #${position} has no block`);
  return block;
}

function openPart(block: string): string {
  return block.slice(0, block.lastIndexOf(BLOCK_CLOSE));
}

describe("prompt-cache friendliness", () => {
  test("the block is the second system message, right after OpenCode's own", () => {
    expect(main).toHaveLength(6);
    main.forEach((request, position) => {
      if (position === 0) return;
      const system = systemMessages(request.body);
      expect(system).toHaveLength(2);
      expect(system[1]).toBe(blockOf(position));
    });
  });

  test("byte-identical across steps while nothing changed", () => {
    expect(contextFilePaths(nth(main, 1))).toEqual([WEB.path, COMPONENTS.path]);
    expect(blockOf(2)).toBe(blockOf(1));
    expect(blockOf(3)).toBe(blockOf(1));
  });

  test("a new file goes at the end: the earlier text stays a prefix", () => {
    expect(contextFilePaths(nth(main, 4))).toEqual([WEB.path, COMPONENTS.path, API.path]);
    expect(blockOf(4).startsWith(openPart(blockOf(3)))).toBe(true);
    expect(contextFilePaths(nth(main, 5))).toEqual([WEB.path, COMPONENTS.path, API.path, LEGACY.path]);
    expect(blockOf(5).startsWith(openPart(blockOf(4)))).toBe(true);
  });
});
