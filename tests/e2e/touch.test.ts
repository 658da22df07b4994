// Nested context appears right after the first touch of a path below it, by every file tool, and
// never before; untouched subtrees never appear. Run once per way of loading the plugin.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { assertRunSucceeded, openScenario, type PluginLoading, type Scenario } from "./harness.ts";
import type { RecordedRequest, ToolCallStep } from "./model-server.ts";
import { API, AUTH, BILLING, COMPONENTS, DEEP_SOURCE, LEGACY, MOBILE, ROOT, SEARCH, WEB, type ContextFile } from "./monorepo.ts";
import { contextBlock, contextFilePaths, nth, occurrences } from "./requests.ts";

type Touch = { tool: string; call: (projectDir: string) => ToolCallStep; brings: ContextFile[] };

/** One touch per tool, each into its own subtree, so each step brings in files no earlier step did. */
const TOUCHES: Touch[] = [
  { tool: "read", call: (dir) => ({ tool: "read", args: { filePath: `${dir}/${DEEP_SOURCE}` } }), brings: [WEB, COMPONENTS] },
  // A relative path: resolved against the session directory.
  { tool: "glob", call: () => ({ tool: "glob", args: { pattern: "*.ts", path: "packages/api/src/handlers" } }), brings: [API] },
  { tool: "grep", call: (dir) => ({ tool: "grep", args: { pattern: "Home", path: `${dir}/packages/mobile/src/screens` } }), brings: [MOBILE] },
  {
    tool: "bash",
    call: (dir) => ({ tool: "bash", args: { command: "ls", workdir: `${dir}/packages/legacy/lib`, description: "List legacy files" } }),
    brings: [LEGACY],
  },
  {
    tool: "edit",
    call: (dir) => ({ tool: "edit", args: { filePath: `${dir}/services/auth/src/token.ts`, oldString: "15", newString: "20" } }),
    brings: [AUTH],
  },
  // A new file in directories that do not exist yet.
  {
    tool: "write",
    call: (dir) => ({ tool: "write", args: { filePath: `${dir}/services/search/src/query/build.ts`, content: "export const build = 1;\n" } }),
    brings: [SEARCH],
  },
];

const LOADINGS: { name: string; plugin: PluginLoading }[] = [
  { name: "plugin spec with options in opencode.json", plugin: { via: "config", options: { fileNames: ["AGENTS.md", "CLAUDE.md"], maxDepth: 10 } } },
  { name: "drop-in in .opencode/plugin/", plugin: { via: "drop-in" } },
];

const scenarios = new Map<string, Scenario>();

beforeAll(async () => {
  // Both loadings at once: the runs are independent and mostly wait on process start-up.
  await Promise.all(
    LOADINGS.map(async ({ name, plugin }) => {
      const scenario = openScenario({ plugin });
      scenarios.set(name, scenario);
      const dir = scenario.project.dir;
      scenario.server.play([...TOUCHES.map((touch) => ({ toolCalls: [touch.call(dir)] })), { text: "done" }]);
      const result = await scenario.project.run("touch one subtree per tool");
      assertRunSucceeded(result, scenario.server, name);
    }),
  );
}, 120_000);

afterAll(async () => {
  await Promise.all([...scenarios.values()].map((scenario) => scenario.close()));
});

for (const { name } of LOADINGS) {
  describe(`touch (${name})`, () => {
    const mainRequests = (): RecordedRequest[] => scenarios.get(name)?.server.mainRequests() ?? [];

    test("one main request per script step", () => {
      expect(mainRequests()).toHaveLength(TOUCHES.length + 1);
    });

    test("before any touch there is no block: the root file is OpenCode's own", () => {
      const first = nth(mainRequests(), 0);
      expect(contextBlock(first)).toBeUndefined();
      expect(occurrences(first, ROOT.marker)).toBe(1);
    });

    TOUCHES.forEach((touch, touchPosition) => {
      test(`${touch.tool}: its subtree's context appears in the very next request, never before`, () => {
        // Main request k is answered by step k, so step k's touch shows from request k + 1 on.
        const seen = mainRequests().map((request) => ({
          inBlock: touch.brings.filter((file) => contextFilePaths(request).includes(file.path)).map((file) => file.path),
          anywhere: touch.brings.filter((file) => occurrences(request, file.marker) > 0).map((file) => file.path),
        }));
        const expected = mainRequests().map((_, position) => {
          const paths = position > touchPosition ? touch.brings.map((file) => file.path) : [];
          return { inBlock: paths, anywhere: paths };
        });
        expect(seen).toEqual(expected);
      });
    });

    test("the block lists root-first chains in touch order and never the untouched subtree", () => {
      const last = nth(mainRequests(), TOUCHES.length);
      expect(contextFilePaths(last)).toEqual(TOUCHES.flatMap((touch) => touch.brings.map((file) => file.path)));
      for (const request of mainRequests()) expect(occurrences(request, BILLING.marker)).toBe(0);
    });
  });
}
