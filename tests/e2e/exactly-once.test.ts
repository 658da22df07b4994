// Each context file reaches the model at most once per request, across system messages, tool outputs
// and user messages, although OpenCode injects the session directory's chain into system[0] itself
// and appends nested files to `read` output as a <system-reminder>: that reminder counts as the
// delivery, and a reminder repeating a file the conversation already holds whole is stripped.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { assertRunSucceeded, openScenario, type Scenario } from "./harness.ts";
import { systemMessages, type RecordedRequest } from "./model-server.ts";
import { API, COMPONENTS, LEGACY, NESTED_FILES, ROOT, WEB } from "./monorepo.ts";
import { lastToolOutput, nth, occurrences, placesOf, repeated, sectionPaths } from "./requests.ts";

const ALL_FILES = [ROOT, ...NESTED_FILES];

const scenarios: Scenario[] = [];
let fromRoot: RecordedRequest[] = [];
let fromSubdirectory: RecordedRequest[] = [];

beforeAll(async () => {
  const rootSession = openScenario({ plugin: { via: "config" } });
  const subdirectorySession = openScenario({ plugin: { via: "drop-in" } });
  scenarios.push(rootSession, subdirectorySession);

  const dir = rootSession.project.dir;
  const ls = (path: string) => ({ toolCalls: [{ tool: "bash", args: { command: "ls", workdir: `${dir}/${path}`, description: "List" } }] });
  const read = (path: string) => ({ toolCalls: [{ tool: "read", args: { filePath: `${dir}/${path}` } }] });
  rootSession.server.play([
    // The plugin delivers packages/api's file; OpenCode's reminder of it on the read after is stripped.
    ls("packages/api/src/handlers"),
    read("packages/api/src/handlers/users.ts"),
    // OpenCode's reminder delivers packages/web's files; the plugin adds nothing for them after.
    read("packages/web/src/components/Button.tsx"),
    ls("packages/web/src/components"),
    read("packages/legacy/lib/old.js"),
    // The agent reads a context file itself: its content is then in the tool output.
    read(API.path),
    { text: "done" },
  ]);
  const subDir = subdirectorySession.project.dir;
  subdirectorySession.server.play([
    { toolCalls: [{ tool: "read", args: { filePath: `${subDir}/packages/web/src/components/Button.tsx` } }] },
    { toolCalls: [{ tool: "bash", args: { command: "ls", workdir: `${subDir}/packages/web/src/components`, description: "List" } }] },
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

describe("exactly once, session at the project root", () => {
  test("no context file reaches the model twice in any request", () => {
    expect(fromRoot).toHaveLength(7);
    // The last request follows the agent's own read of a context file: judged by the test below.
    expect(fromRoot.slice(0, -1).flatMap((request) => repeated(request, ALL_FILES))).toEqual([]);
  });

  test("a file the plugin delivered is not repeated by OpenCode's read reminder later: the reminder is stripped", () => {
    expect(sectionPaths(lastToolOutput(nth(fromRoot, 1)))).toEqual([API.path]);
    const read = lastToolOutput(nth(fromRoot, 2));
    expect(read).toContain("<content>");
    expect(read).not.toContain("Instructions from:");
    expect(placesOf(nth(fromRoot, 2), API.marker)).toEqual(["tool"]);
  });

  test("a file OpenCode's reminder delivered is not sent again by the plugin", () => {
    const reminder = lastToolOutput(nth(fromRoot, 3));
    for (const file of [WEB, COMPONENTS]) expect(reminder).toContain(file.marker);
    expect(lastToolOutput(nth(fromRoot, 4))).not.toContain("<project-context>");
  });

  test("after all the touches each file is there exactly once, and never in a system message", () => {
    const afterReads = nth(fromRoot, 5);
    for (const file of [ROOT, WEB, COMPONENTS, LEGACY, API]) expect({ file: file.path, count: occurrences(afterReads, file.marker) }).toEqual({ file: file.path, count: 1 });
    for (const request of fromRoot) expect(systemMessages(request.body)).toHaveLength(1);
  });

  // A read of a context file itself is the agent asking for the raw file, usually to edit it (it needs
  // the exact text and line numbers, which a block does not give). The plugin leaves that output
  // alone; every other file still reaches the model once.
  test("a context file the agent reads on purpose keeps its raw text in the read output; the others stay single", () => {
    const last = nth(fromRoot, 6);
    expect(lastToolOutput(last)).toMatch(new RegExp(`\\d+: ${API.marker}`));
    expect(repeated(last, ALL_FILES.filter((file) => file !== API))).toEqual([]);
  });
});

describe("exactly once, session started in packages/web", () => {
  test("the files OpenCode injects for the session directory are not repeated by the plugin", () => {
    expect(fromSubdirectory).toHaveLength(3);
    expect(fromSubdirectory.flatMap((request) => repeated(request, ALL_FILES))).toEqual([]);
    const last = nth(fromSubdirectory, 2);
    for (const file of [ROOT, WEB]) expect(placesOf(last, file.marker)).toEqual(["system"]);
    expect(placesOf(last, COMPONENTS.marker)).toEqual(["tool"]);
    for (const request of fromSubdirectory) expect(systemMessages(request.body)).toHaveLength(1);
    expect(lastToolOutput(last)).not.toContain("<project-context>");
  });
});
