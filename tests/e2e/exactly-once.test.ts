// Each context file reaches the model at most once per request, across every system message and tool
// output, although OpenCode injects the session directory's chain into system[0] itself and appends
// nested files to `read` output as a <system-reminder>.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { assertRunSucceeded, openScenario, type Scenario } from "./harness.ts";
import type { RecordedRequest } from "./model-server.ts";
import { API, COMPONENTS, LEGACY, NESTED_FILES, ROOT, WEB, type ContextFile } from "./monorepo.ts";
import { contextFilePaths, nth, occurrences, toolOutputs } from "./requests.ts";

const ALL_FILES = [ROOT, ...NESTED_FILES];

const scenarios: Scenario[] = [];
let fromRoot: RecordedRequest[] = [];
let fromSubdirectory: RecordedRequest[] = [];

beforeAll(async () => {
  const rootSession = openScenario({ plugin: { via: "config" } });
  const subdirectorySession = openScenario({ plugin: { via: "drop-in" } });
  scenarios.push(rootSession, subdirectorySession);

  const dir = rootSession.project.dir;
  rootSession.server.play([
    { toolCalls: [{ tool: "read", args: { filePath: `${dir}/packages/web/src/components/Button.tsx` } }] },
    { toolCalls: [{ tool: "read", args: { filePath: `${dir}/packages/web/src/App.tsx` } }] },
    { toolCalls: [{ tool: "read", args: { filePath: `${dir}/packages/legacy/lib/old.js` } }] },
    // The agent reads a context file itself: its content is then in the tool output.
    { toolCalls: [{ tool: "read", args: { filePath: `${dir}/${API.path}` } }] },
    { text: "done" },
  ]);
  const subDir = subdirectorySession.project.dir;
  subdirectorySession.server.play([
    { toolCalls: [{ tool: "read", args: { filePath: `${subDir}/packages/web/src/components/Button.tsx` } }] },
    { text: "done" },
  ]);

  const [rootResult, subdirectoryResult] = await Promise.all([
    rootSession.project.run("read around"),
    subdirectorySession.project.run("read around", { subdirectory: "packages/web" }),
  ]);
  assertRunSucceeded(rootResult, rootSession.server, "session at the project root");
  assertRunSucceeded(subdirectoryResult, subdirectorySession.server, "session in packages/web");
  fromRoot = rootSession.server.mainRequests();
  fromSubdirectory = subdirectorySession.server.mainRequests();
}, 120_000);

afterAll(async () => {
  await Promise.all(scenarios.map((scenario) => scenario.close()));
});

function expectAtMostOnce(requests: RecordedRequest[], files: ContextFile[]) {
  for (const request of requests) {
    const counts = Object.fromEntries(files.map((file) => [file.path, occurrences(request, file.marker)]));
    const repeated = Object.entries(counts).filter(([, count]) => count > 1);
    expect({ request: request.index, repeated }).toEqual({ request: request.index, repeated: [] });
  }
}

describe("exactly once, session at the project root", () => {
  test("no context file reaches the model twice in any request", () => {
    expect(fromRoot).toHaveLength(5);
    // The last request follows the agent's own read of a context file: judged by the test below.
    expectAtMostOnce(fromRoot.slice(0, -1), ALL_FILES);
  });

  test("touched files are there exactly once: in the block, with OpenCode's read reminder stripped", () => {
    const afterReads = nth(fromRoot, 3);
    for (const file of [WEB, COMPONENTS, LEGACY]) {
      expect(occurrences(afterReads, file.marker)).toBe(1);
      expect(contextFilePaths(afterReads)).toContain(file.path);
    }
    expect(occurrences(afterReads, ROOT.marker)).toBe(1);
    expect(contextFilePaths(afterReads)).not.toContain(ROOT.path);
    for (const output of toolOutputs(afterReads)) expect(output).not.toContain("Instructions from:");
  });

  // A read of a context file itself is the agent asking for the raw file, usually to edit it (it needs
  // the exact text and line numbers, which the block does not give). The plugin leaves that output
  // alone (README, "What it does not do"); every other file still reaches the model once.
  test("a context file the agent reads on purpose keeps its raw text in the read output; the others stay single", () => {
    const last = nth(fromRoot, 4);
    expect(toolOutputs(last).some((output) => new RegExp(`\\d+: ${API.marker}`).test(output))).toBe(true);
    expectAtMostOnce([last], ALL_FILES.filter((file) => file !== API));
  });
});

describe("exactly once, session started in packages/web", () => {
  test("the files OpenCode injects for the session directory are not repeated by the block", () => {
    expect(fromSubdirectory).toHaveLength(2);
    expectAtMostOnce(fromSubdirectory, ALL_FILES);
    const afterRead = nth(fromSubdirectory, 1);
    expect(contextFilePaths(afterRead)).toEqual([COMPONENTS.path]);
    for (const file of [ROOT, WEB, COMPONENTS]) expect(occurrences(afterRead, file.marker)).toBe(1);
  });
});
