// Stable delivery (the default): a file of a subtree the session reaches mid-way arrives once, in the
// output of the tool call that reached it, and never in a system message; OpenCode's own `read`
// reminder counts as that delivery. Every touch is made by another file tool, each into its own
// subtree. Run once per way of loading the plugin.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { assertRunSucceeded, logProblems, openScenario, RIPGREP_ON_PATH, type PluginLoading, type RunResult, type Scenario } from "./harness.ts";
import { systemMessages, type RecordedRequest, type ToolCallStep } from "./model-server.ts";
import { API, AUTH, BILLING, COMPONENTS, DEEP_SOURCE, LEGACY, MOBILE, ROOT, SEARCH, SEARCH_SRC, WEB, type ContextFile } from "./monorepo.ts";
import { lastToolOutput, nth, occurrences, placesOf, sectionPaths } from "./requests.ts";

type Touch = {
  tool: string;
  call: (projectDir: string) => ToolCallStep;
  /** The files it reaches, closest first. */
  brings: ContextFile[];
  /** `read` gets OpenCode's own reminder, which the plugin counts as the delivery. */
  by: "reminder" | "plugin";
  /** glob and grep fail without ripgrep: no output of theirs passes the plugin. */
  needsRipgrep?: boolean;
};

/** One touch per tool, each into its own subtree, so each step brings in files no earlier step did. */
const TOUCHES: Touch[] = [
  { tool: "read", call: (dir) => ({ tool: "read", args: { filePath: `${dir}/${DEEP_SOURCE}` } }), brings: [COMPONENTS, WEB], by: "reminder" },
  // A relative path: resolved against the session directory.
  {
    tool: "glob",
    call: () => ({ tool: "glob", args: { pattern: "*.ts", path: "packages/api/src/handlers" } }),
    brings: [API],
    by: "plugin",
    needsRipgrep: true,
  },
  {
    tool: "grep",
    call: (dir) => ({ tool: "grep", args: { pattern: "Home", path: `${dir}/packages/mobile/src/screens` } }),
    brings: [MOBILE],
    by: "plugin",
    needsRipgrep: true,
  },
  {
    tool: "bash",
    call: (dir) => ({ tool: "bash", args: { command: "ls", workdir: `${dir}/packages/legacy/lib`, description: "List legacy files" } }),
    brings: [LEGACY],
    by: "plugin",
  },
  {
    tool: "edit",
    call: (dir) => ({ tool: "edit", args: { filePath: `${dir}/services/auth/src/token.ts`, oldString: "15", newString: "20" } }),
    brings: [AUTH],
    by: "plugin",
  },
  // A new file in directories that do not exist yet, two context files above it.
  {
    tool: "write",
    call: (dir) => ({ tool: "write", args: { filePath: `${dir}/services/search/src/query/build.ts`, content: "export const build = 1;\n" } }),
    brings: [SEARCH_SRC, SEARCH],
    by: "plugin",
  },
];

/**
 * The step whose tool output carries a touch's files: its own, or, when the tool failed (no
 * ripgrep), the next tool call that succeeded (the plugin then delivers everything still owed).
 */
function arrivalStep(position: number): number {
  for (let step = position; step < TOUCHES.length; step++) if (!(TOUCHES[step]!.needsRipgrep && !RIPGREP_ON_PATH)) return step;
  throw new Error(`no successful tool call after step ${position}`);
}

/** Files arriving with step `step`'s output, as the plugin orders them: the latest touch first, each closest first. */
function arrivingWith(step: number): ContextFile[] {
  return TOUCHES.flatMap((touch, position) => (arrivalStep(position) === step && touch.by === "plugin" ? [position] : []))
    .reverse()
    .flatMap((position) => TOUCHES[position]!.brings);
}

const LOADINGS: { name: string; plugin: PluginLoading }[] = [
  { name: "plugin spec with options in opencode.json", plugin: { via: "config", options: { fileNames: ["AGENTS.md", "CLAUDE.md"], maxDepth: 10 } } },
  { name: "drop-in in .opencode/plugin/", plugin: { via: "drop-in" } },
];

const scenarios = new Map<string, Scenario>();
const results = new Map<string, RunResult>();

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
      results.set(name, result);
    }),
  );
}, 120_000);

afterAll(async () => {
  await Promise.all([...scenarios.values()].map((scenario) => scenario.close()));
});

for (const { name } of LOADINGS) {
  describe(`touch (${name})`, () => {
    const mainRequests = (): RecordedRequest[] => scenarios.get(name)?.server.mainRequests() ?? [];

    test("one main request per script step; the plugin logged no warning or error", () => {
      expect(mainRequests()).toHaveLength(TOUCHES.length + 1);
      expect(logProblems(results.get(name)!)).toEqual([]);
    });

    test("the system prompt is OpenCode's alone in every request: the session started with nothing OpenCode does not carry", () => {
      for (const request of mainRequests()) expect(systemMessages(request.body)).toHaveLength(1);
      expect(occurrences(nth(mainRequests(), 0), ROOT.marker)).toBe(1);
    });

    TOUCHES.forEach((touch, position) => {
      const arrival = arrivalStep(position);
      const where = arrival === position ? "in its own tool output" : `in the next tool output that passed the plugin (step ${arrival}: ${touch.tool} fails without ripgrep)`;
      test(`${touch.tool}: its subtree's files reach the model once, ${where}, never before and never in a system message`, () => {
        // Main request k carries the output of step k - 1.
        const seen = mainRequests().map((request) => touch.brings.map((file) => ({ file: file.path, places: placesOf(request, file.marker) })));
        const expected = mainRequests().map((_, request) => touch.brings.map((file) => ({ file: file.path, places: request > arrival ? ["tool"] : [] })));
        expect(seen).toEqual(expected);
        const carrier = lastToolOutput(nth(mainRequests(), arrival + 1));
        for (const file of touch.brings) expect(carrier).toContain(file.marker);
        if (touch.by === "reminder") {
          expect(carrier).toContain("<system-reminder>");
          expect(carrier).not.toContain("<project-context>");
        } else {
          expect(carrier.split("<project-context>")).toHaveLength(2);
        }
      });
    });

    test("each tool output the plugin appends to lists its files closest first, the latest touch first", () => {
      const appended = mainRequests()
        .slice(1)
        .map((request) => sectionPaths(lastToolOutput(request)));
      const expected = TOUCHES.map((_, step) => arrivingWith(step).map((file) => file.path));
      expect(appended).toEqual(expected);
    });

    test("the untouched subtree never shows", () => {
      for (const request of mainRequests()) expect(occurrences(request, BILLING.marker)).toBe(0);
    });
  });
}
