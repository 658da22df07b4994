// Context is per session: two sessions of one server see only their own touches, a session continued
// in a new process (`opencode run -c`) is not sent again what its conversation already carries, and a
// subagent session gets the context for what the subagent touches, on its own tool output.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { assertRunSucceeded, assertScriptPlayed, openScenario, type Scenario } from "./harness.ts";
import { firstUserText, systemMessages, type RecordedRequest } from "./model-server.ts";
import { API, AUTH, COMPONENTS, LEGACY, WEB } from "./monorepo.ts";
import { contextBlock, lastToolOutput, nth, occurrences, placesOf, sectionPaths } from "./requests.ts";

const SUBAGENT_PROMPT = "Subagent: read the users handler";
const STEP_WAIT_MS = 20_000;

const scenarios: Scenario[] = [];
const requestsOf = (scenario: Scenario, userText: string): RecordedRequest[] =>
  scenario.server.mainRequests().filter((request) => firstUserText(request.body).includes(userText));

let twoSessions: { alpha: RecordedRequest[]; beta: RecordedRequest[] };
let continued: { before: RecordedRequest[]; after: RecordedRequest[] };
let subagent: { parent: RecordedRequest[]; child: RecordedRequest[] };

async function runTwoSessionsInOneServer() {
  const scenario = openScenario({ plugin: { via: "drop-in" } });
  scenarios.push(scenario);
  const { server, project } = scenario;
  const dir = project.dir;
  const bothStarted = () =>
    server.waitFor(
      () => requestsOf(scenario, "alpha").length > 0 && requestsOf(scenario, "beta").length > 0,
      STEP_WAIT_MS,
      "both sessions' first requests",
    );
  // Each session's touch waits for the other session's first request, so their steps interleave.
  server.play({
    matches: (request) => firstUserText(request.body).includes("alpha"),
    steps: [
      async () => {
        await bothStarted();
        return { toolCalls: [{ tool: "bash", args: { command: "ls", workdir: `${dir}/packages/api/src/handlers`, description: "List" } }] };
      },
      { text: "alpha done" },
    ],
  });
  server.play({
    matches: (request) => firstUserText(request.body).includes("beta"),
    steps: [
      async () => {
        await bothStarted();
        return { toolCalls: [{ tool: "bash", args: { command: "ls", workdir: `${dir}/packages/web/src/components`, description: "List" } }] };
      },
      { text: "beta done" },
    ],
  });
  const opencode = await project.serve();
  const [alphaSession, betaSession] = await Promise.all([opencode.createSession(), opencode.createSession()]);
  await Promise.all([opencode.prompt(alphaSession, "alpha task"), opencode.prompt(betaSession, "beta task")]);
  await opencode.stop();
  assertScriptPlayed(server, "two sessions in one server");
  twoSessions = { alpha: requestsOf(scenario, "alpha"), beta: requestsOf(scenario, "beta") };
}

async function runContinuedInNewProcess() {
  const scenario = openScenario({ plugin: { via: "config" } });
  scenarios.push(scenario);
  const { server, project } = scenario;
  const dir = project.dir;
  server.play([
    { toolCalls: [{ tool: "read", args: { filePath: `${dir}/packages/api/src/handlers/users.ts` } }] },
    { toolCalls: [{ tool: "bash", args: { command: "ls", workdir: `${dir}/packages/legacy/lib`, description: "List legacy files" } }] },
    { toolCalls: [{ tool: "edit", args: { filePath: `${dir}/services/auth/src/token.ts`, oldString: "15", newString: "30" } }] },
    { text: "first run done" },
  ]);
  assertRunSucceeded(await project.run("first"), server, "first run");
  const before = server.mainRequests();
  // The continued run touches the same directories again: nothing is owed there.
  server.play([
    { toolCalls: [{ tool: "bash", args: { command: "ls", workdir: `${dir}/packages/legacy/lib`, description: "List legacy files" } }] },
    { toolCalls: [{ tool: "read", args: { filePath: `${dir}/packages/api/src/handlers/users.ts` } }] },
    { toolCalls: [{ tool: "bash", args: { command: "ls", workdir: `${dir}/services/auth/src`, description: "List auth files" } }] },
    { text: "continued" },
  ]);
  assertRunSucceeded(await project.run("second", { continueLast: true }), server, "continued run");
  continued = { before, after: server.mainRequests().slice(before.length) };
}

async function runSubagent() {
  const scenario = openScenario({ plugin: { via: "config" } });
  scenarios.push(scenario);
  const { server, project } = scenario;
  const dir = project.dir;
  server.play({
    matches: (request) => firstUserText(request.body).includes(SUBAGENT_PROMPT),
    steps: [{ toolCalls: [{ tool: "bash", args: { command: "ls", workdir: `${dir}/packages/api/src/handlers`, description: "List" } }] }, { text: "subagent done" }],
  });
  server.play({
    matches: (request) => firstUserText(request.body).includes("delegate"),
    steps: [
      { toolCalls: [{ tool: "task", args: { description: "Inspect users handler", prompt: SUBAGENT_PROMPT, subagent_type: "general" } }] },
      { text: "parent done" },
    ],
  });
  assertRunSucceeded(await project.run("delegate"), server, "subagent run");
  subagent = { parent: requestsOf(scenario, "delegate"), child: requestsOf(scenario, SUBAGENT_PROMPT) };
}

beforeAll(async () => {
  await Promise.all([runTwoSessionsInOneServer(), runContinuedInNewProcess(), runSubagent()]);
}, 150_000);

afterAll(async () => {
  await Promise.all(scenarios.map((scenario) => scenario.close()));
});

describe("two sessions in one server", () => {
  test("each session gets only the context of what it touched, on its own tool output", () => {
    const { alpha, beta } = twoSessions;
    expect(alpha).toHaveLength(2);
    expect(beta).toHaveLength(2);
    expect(sectionPaths(lastToolOutput(nth(alpha, 1)))).toEqual([API.path]);
    expect(sectionPaths(lastToolOutput(nth(beta, 1)))).toEqual([COMPONENTS.path, WEB.path]);
    for (const request of alpha) expect(occurrences(request, WEB.marker) + occurrences(request, COMPONENTS.marker)).toBe(0);
    for (const request of beta) expect(occurrences(request, API.marker)).toBe(0);
    for (const request of [...alpha, ...beta]) expect(systemMessages(request.body)).toHaveLength(1);
  });
});

describe("a session continued in a new process", () => {
  test("the first run delivered each file once", () => {
    const lastBefore = nth(continued.before, continued.before.length - 1);
    for (const file of [API, LEGACY, AUTH]) expect(placesOf(lastBefore, file.marker)).toEqual(["tool"]);
  });

  test("the continued run sends nothing its conversation already carries, in no request, and no system block", () => {
    expect(continued.after).toHaveLength(4);
    for (const request of continued.after) {
      expect(systemMessages(request.body)).toHaveLength(1);
      for (const file of [API, LEGACY, AUTH]) expect({ request: request.index, file: file.path, places: placesOf(request, file.marker) }).toEqual({ request: request.index, file: file.path, places: ["tool"] });
    }
    for (const request of continued.after.slice(1)) expect(lastToolOutput(request)).not.toContain("<project-context>");
    for (const request of continued.after.slice(1)) expect(lastToolOutput(request)).not.toContain("Instructions from:");
  });
});

describe("a subagent session", () => {
  test("gets the context of what the subagent touches, on that tool's output; the parent, which touched nothing, gets none", () => {
    const { parent, child } = subagent;
    expect(child).toHaveLength(2);
    expect(contextBlock(nth(child, 0))).toBeUndefined();
    expect(sectionPaths(lastToolOutput(nth(child, 1)))).toEqual([API.path]);
    expect(placesOf(nth(child, 1), API.marker)).toEqual(["tool"]);
    expect(parent.length).toBeGreaterThan(0);
    for (const request of parent) expect(contextBlock(request)).toBeUndefined();
    for (const request of parent) expect(occurrences(request, API.marker)).toBe(0);
  });
});
