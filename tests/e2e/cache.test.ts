// Prompt-cache friendliness. OpenCode puts cache markers on the first two system messages, so the
// plugin's block is the second one. Stable delivery (the default): that block holds what the session
// had at its start and stays byte-identical in every main request until a compaction, whatever the
// session reaches. `delivery: "system"`: the block is rebuilt every step, byte-identical while
// nothing changed.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { assertRunSucceeded, openScenario, type Scenario } from "./harness.ts";
import { systemMessages, type RecordedRequest, type ScriptStep } from "./model-server.ts";
import { API, COMPONENTS, DEEP_SOURCE, LEGACY, NESTED_FILES, ROOT, WEB, type ContextFile } from "./monorepo.ts";
import { contextBlock, contextFilePaths, nth, occurrences, repeated, toolOutputs } from "./requests.ts";

/**
 * With `fileNames` preferring CLAUDE.md the plugin takes a root CLAUDE.md that OpenCode (which takes
 * the root AGENTS.md) does not carry: the session starts with a block.
 */
const ROOT_CLAUDE: ContextFile = { path: "CLAUDE.md", marker: "CTX-ROOT-CLAUDE:" };

const script = (dir: string): ScriptStep[] => [
  { toolCalls: [{ tool: "read", args: { filePath: `${dir}/packages/web/src/components/Button.tsx` } }] },
  // Same directories again, then a directory without context: nothing new either time.
  { toolCalls: [{ tool: "read", args: { filePath: `${dir}/${DEEP_SOURCE}` } }] },
  { toolCalls: [{ tool: "read", args: { filePath: `${dir}/docs/guide.md` } }] },
  // packages/api sorts before packages/web, yet must not be put in front of it.
  { toolCalls: [{ tool: "glob", args: { pattern: "*.ts", path: `${dir}/packages/api/src/handlers` } }] },
  { toolCalls: [{ tool: "bash", args: { command: "ls", workdir: `${dir}/packages/legacy/lib`, description: "List legacy files" } }] },
  { text: "done" },
];

let stable: Scenario;
let perStep: Scenario;
let stableMain: RecordedRequest[] = [];
let perStepMain: RecordedRequest[] = [];

beforeAll(async () => {
  stable = openScenario({ plugin: { via: "config", options: { fileNames: ["CLAUDE.md", "AGENTS.md"] } } });
  writeFileSync(join(stable.project.dir, ROOT_CLAUDE.path), `# Root (Claude)\n${ROOT_CLAUDE.marker} prefer small commits.\n`);
  stable.server.play(script(stable.project.dir));
  perStep = openScenario({ plugin: { via: "config", options: { delivery: "system" } } });
  // The same directories reached without `read`: this mode leaves a file OpenCode's read reminder
  // carries out of the block (tests/delivery.test.ts), and this scenario is about the block itself.
  perStep.server.play(
    script(perStep.project.dir).map((step) => {
      const call = typeof step === "function" ? undefined : step.toolCalls?.[0];
      if (call?.tool !== "read") return step;
      const workdir = dirname(String(call.args.filePath));
      return { toolCalls: [{ tool: "bash", args: { command: "ls", workdir, description: "List files" } }] };
    }),
  );
  const [stableRun, perStepRun] = await Promise.all([stable.project.run("work across packages"), perStep.project.run("work across packages")]);
  assertRunSucceeded(stableRun, stable.server, "stable delivery run");
  assertRunSucceeded(perStepRun, perStep.server, "system delivery run");
  stableMain = stable.server.mainRequests();
  perStepMain = perStep.server.mainRequests();
}, 120_000);

afterAll(async () => {
  await Promise.all([stable.close(), perStep.close()]);
});

function blockOf(requests: RecordedRequest[], position: number): string {
  const block = contextBlock(nth(requests, position));
  if (block === undefined) throw new Error(`main request #${position} has no block`);
  return block;
}

describe("prompt cache, stable delivery (the default)", () => {
  test("system[1] is byte-identical in every main request of the session, from the first on, while the session reaches new directories", () => {
    expect(stableMain).toHaveLength(6);
    const first = blockOf(stableMain, 0);
    expect(contextFilePaths(nth(stableMain, 0))).toEqual([ROOT_CLAUDE.path]);
    for (const request of stableMain) {
      const system = systemMessages(request.body);
      expect(system).toHaveLength(2);
      expect(system[1]).toBe(first);
    }
  });

  test("what the session reached went to tool outputs instead, each file once", () => {
    const last = nth(stableMain, 5);
    for (const file of [WEB, COMPONENTS, API, LEGACY]) {
      expect(occurrences(last, file.marker)).toBe(1);
      expect(contextBlock(last)).not.toContain(file.marker);
    }
    expect(toolOutputs(last).filter((output) => output.includes("<project-context>"))).toHaveLength(1);
  });
});

describe("prompt cache, delivery: system", () => {
  test("the block is the second system message, right after OpenCode's own", () => {
    expect(perStepMain).toHaveLength(6);
    expect(systemMessages(nth(perStepMain, 0).body)).toHaveLength(1);
    perStepMain.slice(1).forEach((request, index) => {
      const system = systemMessages(request.body);
      expect(system).toHaveLength(2);
      expect(system[1]).toBe(blockOf(perStepMain, index + 1));
    });
  });

  test("byte-identical across steps while nothing changed", () => {
    expect(contextFilePaths(nth(perStepMain, 1))).toEqual([WEB.path, COMPONENTS.path]);
    expect(blockOf(perStepMain, 2)).toBe(blockOf(perStepMain, 1));
    expect(blockOf(perStepMain, 3)).toBe(blockOf(perStepMain, 1));
  });

  // The design's display order is the tree's, so "closer wins" reads naturally; a file joining in
  // the middle costs the cache from there on, which this mode accepts by rebuilding every step.
  test("a new file joins in tree order: parents before children, siblings by path", () => {
    expect(contextFilePaths(nth(perStepMain, 4))).toEqual([API.path, WEB.path, COMPONENTS.path]);
    expect(contextFilePaths(nth(perStepMain, 5))).toEqual([API.path, LEGACY.path, WEB.path, COMPONENTS.path]);
  });

  test("each file reaches the model once per request", () => {
    for (const request of perStepMain) {
      expect(repeated(request, [ROOT, ...NESTED_FILES])).toEqual([]);
      for (const output of toolOutputs(request)) expect(output).not.toContain("Instructions from:");
      for (const output of toolOutputs(request)) expect(output).not.toContain("<project-context>");
    }
  });
});
