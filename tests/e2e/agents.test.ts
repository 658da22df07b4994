// `agents` / `exclude_agents` (and the `apply_to` alias) with the real binary: the rules follow the
// agent of each session's user message (`chat.message` input.agent). One build session touches every
// package, then starts subagents through the `task` tool; each runs in a session of its own whose
// first user message is the task prompt, and OpenCode 1.18.33 calls `chat.message` for it with the
// subagent's agent ("general", or "plan": `task` accepts a primary agent too and runs it with its own
// prompt). The default (stable) delivery puts files on tool outputs; markers are looked for anywhere
// the model reads, OpenCode's own read reminders included.

import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { assertRunSucceeded, logProblems, openScenario, type RunResult, type Scenario } from "./harness.ts";
import { firstUserText, type RecordedRequest, type Step } from "./model-server.ts";
import { COMPONENTS, ROOT, type ContextFile } from "./monorepo.ts";
import { lastToolOutput, nth, occurrences, placesOf, sectionPaths } from "./requests.ts";

/** Laid over the copy of tests/fixtures/e2e-monorepo (the harness's fixture): frontmatter versions of some of its files. */
const AGENTS_FIXTURE = resolve(import.meta.dir, "../fixtures/e2e-agents");

const file = (path: string, marker: string): ContextFile => ({ path, marker });
/** `agents: [build]`. */
const BUILD_ONLY = file("packages/api/AGENTS.md", "CTX-BUILD-ONLY:");
/** No frontmatter, below BUILD_ONLY: every agent gets it. */
const HANDLERS = file("packages/api/src/handlers/AGENTS.md", "CTX-HANDLERS:");
/** `exclude_agents: [general]`. */
const NOT_FOR_SUB = file("packages/web/AGENTS.md", "CTX-NOT-FOR-SUB:");
/** `apply_to: build`: the alias, written as a string. */
const APPLY_TO_BUILD = file("packages/mobile/AGENTS.md", "CTX-APPLY-TO-BUILD:");
/** `exclude_agents: [plan]`. */
const NOT_FOR_PLAN = file("services/auth/AGENTS.md", "CTX-NOT-FOR-PLAN:");
const EVERY_FILE = [BUILD_ONLY, HANDLERS, NOT_FOR_SUB, COMPONENTS, APPLY_TO_BUILD, NOT_FOR_PLAN];
/** Frontmatter keys as written in the fixture: the plugin strips frontmatter before the model sees a file. */
const FRONTMATTER_KEYS = ["agents:", "exclude_agents:", "apply_to:"];

// Each session is told apart by its first user message: these words appear in one prompt only.
const MAIN_PROMPT = "main-session: touch every package, then hand work to subagents";
const GENERAL_PROMPT = "general-subagent: touch every package";
const PLAN_PROMPT = "plan-subagent: survey the packages";
const READING_PROMPT = "reading-subagent: read the web app";
const DEFAULT_PLAN_PROMPT = "default-agent-run: survey the api";
/** What OpenCode adds to every user message of the plan agent: proof a session really runs as plan. */
const PLAN_MODE_REMINDER = "Plan Mode - System Reminder";

const scenarios: Scenario[] = [];
const results: RunResult[] = [];
let sessions: { main: RecordedRequest[]; general: RecordedRequest[]; plan: RecordedRequest[]; reading: RecordedRequest[] };
let defaultPlan: RecordedRequest[];

const ofSession = (scenario: Scenario, prompt: string): RecordedRequest[] =>
  scenario.server.mainRequests().filter((request) => firstUserText(request.body).includes(prompt));

function openAgentsScenario(plugin: "config" | "drop-in"): Scenario {
  const scenario = openScenario({ plugin: { via: plugin } });
  scenarios.push(scenario);
  cpSync(AGENTS_FIXTURE, scenario.project.dir, { recursive: true });
  return scenario;
}

function stepsIn(dir: string) {
  return {
    ls: (path: string): Step => ({ toolCalls: [{ tool: "bash", args: { command: "ls", workdir: `${dir}/${path}`, description: "List" } }] }),
    write: (path: string): Step => ({ toolCalls: [{ tool: "write", args: { filePath: `${dir}/${path}`, content: "export const added = 1;\n" } }] }),
    read: (path: string): Step => ({ toolCalls: [{ tool: "read", args: { filePath: `${dir}/${path}` } }] }),
    task: (subagent: string, prompt: string): Step => ({
      toolCalls: [{ tool: "task", args: { description: `Delegate to ${subagent}`, prompt, subagent_type: subagent } }],
    }),
  };
}

/** One process, four sessions: build (the run), then a general, a plan and a reading general subagent, one after another. */
async function runBuildWithSubagents() {
  const scenario = openAgentsScenario("config");
  const { server, project } = scenario;
  const { ls, write, read, task } = stepsIn(project.dir);
  const forSession = (prompt: string, steps: Step[]) => server.play({ matches: (request) => firstUserText(request.body).includes(prompt), steps });
  forSession(MAIN_PROMPT, [
    ls("packages/api/src/handlers"),
    ls("packages/web/src/components"),
    ls("packages/mobile/src/screens"),
    ls("services/auth/src"),
    task("general", GENERAL_PROMPT),
    task("plan", PLAN_PROMPT),
    task("general", READING_PROMPT),
    { text: "main done" },
  ]);
  forSession(GENERAL_PROMPT, [
    ls("packages/api/src/handlers"),
    write("packages/web/src/components/Badge.tsx"),
    ls("packages/mobile/src/screens"),
    ls("services/auth/src"),
    { text: "general done" },
  ]);
  forSession(PLAN_PROMPT, [ls("packages/api/src/handlers"), ls("services/auth/src"), ls("packages/web/src/components"), { text: "plan done" }]);
  forSession(READING_PROMPT, [read("packages/web/src/App.tsx"), { text: "reading done" }]);
  const result = await project.run(MAIN_PROMPT);
  assertRunSucceeded(result, server, "build session with subagents");
  results.push(result);
  sessions = {
    main: ofSession(scenario, MAIN_PROMPT),
    general: ofSession(scenario, GENERAL_PROMPT),
    plan: ofSession(scenario, PLAN_PROMPT),
    reading: ofSession(scenario, READING_PROMPT),
  };
}

/** `opencode run` without `--agent` in a project whose opencode.json makes plan the default agent. */
async function runWithPlanAsDefaultAgent() {
  const scenario = openAgentsScenario("drop-in");
  const { server, project } = scenario;
  const configPath = join(project.dir, "opencode.json");
  writeFileSync(configPath, JSON.stringify({ ...JSON.parse(readFileSync(configPath, "utf8")), default_agent: "plan" }));
  const { ls } = stepsIn(project.dir);
  server.play([ls("packages/api/src/handlers"), { text: "default plan done" }]);
  const result = await project.run(DEFAULT_PLAN_PROMPT);
  assertRunSucceeded(result, server, "plan as the default agent");
  results.push(result);
  defaultPlan = ofSession(scenario, DEFAULT_PLAN_PROMPT);
}

beforeAll(async () => {
  await Promise.all([runBuildWithSubagents(), runWithPlanAsDefaultAgent()]);
}, 90_000);

afterAll(async () => {
  await Promise.all(scenarios.map((scenario) => scenario.close()));
});

/** Per request of a session, the files whose marker reaches the model, and where. */
function seen(requests: RecordedRequest[], files: readonly ContextFile[]): { request: number; file: string; places: string[] }[] {
  return requests.flatMap((request) => files.map((file) => ({ request: request.index, file: file.path, places: placesOf(request, file.marker) })));
}

/** The files the plugin appended to the output of each tool call of a session, in order. */
const appendedPerStep = (requests: RecordedRequest[]): string[][] => requests.slice(1).map((request) => sectionPaths(lastToolOutput(request)));

test("every session played its script; the plugin logged no warning or error", () => {
  expect([sessions.main, sessions.general, sessions.plan, sessions.reading, defaultPlan].map((requests) => requests.length)).toEqual([8, 5, 4, 2, 2]);
  for (const result of results) expect(logProblems(result)).toEqual([]);
});

test("OpenCode's root file is in every request of every session, once, in its system prompt", () => {
  for (const request of [...sessions.main, ...sessions.general, ...sessions.plan, ...sessions.reading, ...defaultPlan]) {
    expect({ request: request.index, places: placesOf(request, ROOT.marker) }).toEqual({ request: request.index, places: ["system"] });
  }
});

test("no frontmatter reaches the model through the plugin", () => {
  // The reading subagent is left out: OpenCode's own `read` reminder carries files raw (see the gap below).
  for (const request of [...sessions.main, ...sessions.general, ...sessions.plan, ...defaultPlan]) {
    for (const key of FRONTMATTER_KEYS) expect({ request: request.index, key, count: occurrences(request, key) }).toEqual({ request: request.index, key, count: 0 });
  }
});

describe("the build session", () => {
  test("gets every file of what it touches, each on the output of the touching call, closest first", () => {
    expect(appendedPerStep(sessions.main.slice(0, 5))).toEqual([
      [HANDLERS.path, BUILD_ONLY.path],
      [COMPONENTS.path, NOT_FOR_SUB.path],
      [APPLY_TO_BUILD.path],
      [NOT_FOR_PLAN.path],
    ]);
    const last = nth(sessions.main, sessions.main.length - 1);
    for (const contextFile of EVERY_FILE) expect({ file: contextFile.path, places: placesOf(last, contextFile.marker) }).toEqual({ file: contextFile.path, places: ["tool"] });
  });
});

describe("a general subagent (its own session, chat.message agent \"general\")", () => {
  test("never gets an `agents: [build]` file, an `apply_to: build` file or an `exclude_agents: [general]` file, in any request", () => {
    const leaks = seen(sessions.general, [BUILD_ONLY, APPLY_TO_BUILD, NOT_FOR_SUB]).filter((entry) => entry.places.length > 0);
    expect(leaks).toEqual([]);
  });

  test("gets the files meant for every agent, on the output of the call that touched them", () => {
    // Its touches: api/src/handlers, a write in web/src/components, mobile/src/screens, services/auth/src.
    expect(appendedPerStep(sessions.general)).toEqual([[HANDLERS.path], [COMPONENTS.path], [], [NOT_FOR_PLAN.path]]);
    expect(lastToolOutput(nth(sessions.general, 3))).not.toContain("<project-context>");
  });
});

describe("the plan agent as a subagent (chat.message agent \"plan\")", () => {
  test("runs as the real plan agent", () => {
    for (const request of sessions.plan) expect(firstUserText(request.body)).toContain(PLAN_MODE_REMINDER);
  });

  test("never gets an `agents: [build]` file or an `exclude_agents: [plan]` file; gets an `exclude_agents: [general]` one", () => {
    const leaks = seen(sessions.plan, [BUILD_ONLY, NOT_FOR_PLAN]).filter((entry) => entry.places.length > 0);
    expect(leaks).toEqual([]);
    // Its touches: api/src/handlers, services/auth/src, web/src/components.
    expect(appendedPerStep(sessions.plan)).toEqual([[HANDLERS.path], [], [COMPONENTS.path, NOT_FOR_SUB.path]]);
  });
});

describe("OpenCode's own copies and its default agent", () => {
  test("a general subagent's `read` below the web package ran", () => {
    expect(lastToolOutput(nth(sessions.reading, 1))).toContain("packages/web/src/App.tsx</path>");
  });

  // OpenCode 1.18.33 appends `<system-reminder>Instructions from: …` with the raw file (frontmatter
  // included) to a `read` below it; the plugin strips that entry for a file the rules leave out.
  test("an `exclude_agents: [general]` file stays out of a general subagent that reads below it", () => {
    for (const request of sessions.reading) expect(occurrences(request, NOT_FOR_SUB.marker)).toBe(0);
  });

  test("with `default_agent: plan` and no `--agent`, the run is the plan agent's and the plugin delivers on its touch", () => {
    for (const request of defaultPlan) expect(firstUserText(request.body)).toContain(PLAN_MODE_REMINDER);
    expect(appendedPerStep(defaultPlan)[0]).toContain(HANDLERS.path);
  });

  // `opencode run` without `--agent` (and any HTTP client that sends no agent) calls `chat.message`
  // with input.agent undefined; the agent OpenCode resolved is in output.message.agent ("plan" here).
  test("with `default_agent: plan` and no `--agent`, an `agents: [build]` file stays out", () => {
    for (const request of defaultPlan) expect(occurrences(request, BUILD_ONLY.marker)).toBe(0);
  });
});
