// The three ways a user installs the plugin, each with the real opencode binary and the package as
// it would be published (`npm pack`, which builds dist/ through `prepack`):
//   (a) by name, `"plugin": ["opencode-project-context"]`, installed by OpenCode itself from a
//       registry (a throwaway verdaccio on 127.0.0.1 the test publishes the tarball to);
//   (b) a `file://` path in opencode.json, to the package installed from its tarball in a folder;
//   (c) a drop-in file in .opencode/plugin/ that re-exports the package installed in the project.
// Each ends with a nested context file's text in a real request to the model. The TUI module is
// installed beside it each way OpenCode loads TUI plugins (tui.json's `plugin` list: by name, by a
// file:// path with options, by a path relative to tui.json into the project's node_modules), and
// the real TUI, continuing the session in tmux, shows that file in its sidebar. Also: the package's
// bin runs `explain` on plain Node, with no Bun on the PATH.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { readRecords } from "../../plugin/records/format.ts";
import { formatTokens } from "../../plugin/tui/view.ts";
import { assertRunSucceeded, openScenario, type Scenario } from "./harness.ts";
import { runtimeDependencyFolders } from "./install/dependencies.ts";
import { npm, npmEnv, REPO_ROOT } from "./install/npm.ts";
import { nodeBinary, packInstalled, startRegistry, type Registry } from "./install/registry.ts";
import type { RecordedRequest } from "./model-server.ts";
import { API, ROOT } from "./monorepo.ts";
import { openTerminal, type Terminal } from "./terminal.ts";

const NAME = "opencode-project-context";
const VERSION = (JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { version: string }).version;
/**
 * OpenCode delivers a nested file itself only with a `read`; a command run below packages/api reaches
 * it only through the plugin (on that command's output). Not a glob: without ripgrep it fails, and a
 * failed tool's output never passes the plugin.
 */
const TOUCH = { tool: "bash", args: { command: "ls", workdir: "packages/api/src/handlers", description: "List handlers" } };

type Install = {
  name: string;
  scenario: Scenario;
  /** Where both modules keep the records (the server plugin writes them, the TUI module reads them). */
  recordsDir: string;
  /** The TUI, continuing the session the run made. */
  terminal?: Terminal;
};

let root = "";
let registry: Registry | undefined;
let tarball = "";
/** The package installed from its tarball (dependencies from the registry), for the file:// install. */
let unpacked = "";
const installs = new Map<string, Install>();

/** Replaces the harness's plugin entry in opencode.json. */
function setPlugins(scenario: Scenario, plugin: unknown[]) {
  const path = join(scenario.project.dir, "opencode.json");
  const config = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  writeFileSync(path, JSON.stringify({ ...config, plugin }, null, 2));
}

/** The scenario's isolated HOME (the harness keeps it next to the project). */
const homeOf = (scenario: Scenario) => join(dirname(scenario.project.dir), "home");
const defaultRecordsDir = (scenario: Scenario) => join(homeOf(scenario), ".local/state/opencode-project-context");

/** The project's tui.json: where OpenCode finds TUI plugins (it never reads them from opencode.json). */
function setTuiPlugins(scenario: Scenario, plugin: unknown[]) {
  writeFileSync(join(scenario.project.dir, "tui.json"), JSON.stringify({ plugin }, null, 2));
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "pc-install-"));
  const npmHome = join(root, "npm-home");
  // The registry starts while the package is built and packed and its dependencies are packed.
  const [started, report, dependencies] = await Promise.all([
    startRegistry(join(root, "registry")),
    npm(["pack", "--pack-destination", root, "--json"], { cwd: REPO_ROOT, env: npmEnv(npmHome) }),
    packInstalled(runtimeDependencyFolders(), join(root, "dependencies")),
  ]);
  registry = started;
  tarball = join(root, (JSON.parse(report) as { filename: string }[])[0]!.filename);
  await Promise.all([registry.publish(tarball), registry.publishPacked(dependencies)]);
  const fromRegistry = npmEnv(npmHome, { npm_config_registry: registry.url });

  // (b) the tarball installed into a folder of its own, its dependencies beside it.
  const fileInstall = join(root, "file-install");
  mkdirSync(fileInstall, { recursive: true });
  unpacked = join(fileInstall, "node_modules", NAME);

  const byName = openScenario({ plugin: { via: "config" } });
  installs.set("by name from a registry", { name: "by name from a registry", scenario: byName, recordsDir: defaultRecordsDir(byName) });
  setPlugins(byName, [NAME]);
  setTuiPlugins(byName, [NAME]);
  // OpenCode installs `name@latest` with npm's own configuration: ~/.npmrc names the registry.
  writeFileSync(join(homeOf(byName), ".npmrc"), `registry=${registry.url}\n`);

  const byPath = openScenario({ plugin: { via: "config" } });
  // Both modules take the same `recordsDir` option; elsewhere than the default, to prove they do.
  const recordsDir = join(root, "records-b");
  installs.set("file:// path in opencode.json", { name: "file:// path in opencode.json", scenario: byPath, recordsDir });
  setPlugins(byPath, [[`file://${unpacked}`, { systemTokens: 8000, recordsDir }]]);
  setTuiPlugins(byPath, [[`file://${unpacked}`, { recordsDir }]]);

  const dropIn = openScenario({ plugin: { via: "drop-in" } });
  installs.set("drop-in in .opencode/plugin/", { name: "drop-in in .opencode/plugin/", scenario: dropIn, recordsDir: defaultRecordsDir(dropIn) });
  writeFileSync(join(dropIn.project.dir, ".opencode/plugin/project-context.ts"), `export { default } from "${NAME}";\n`);
  // TUI plugins have no drop-in folder: a path relative to tui.json names the package the project installed.
  setTuiPlugins(dropIn, [`./node_modules/${NAME}`]);

  const play = async ({ name, scenario }: Install) => {
    scenario.server.play([{ toolCalls: [TOUCH] }, { text: "done" }]);
    const result = await scenario.project.run("look at the api handlers");
    assertRunSucceeded(result, scenario.server, name);
  };
  await Promise.all([
    // (a) installs itself as OpenCode starts.
    play(installs.get("by name from a registry")!),
    npm(["install", "--ignore-scripts", "--no-package-lock", tarball], { cwd: fileInstall, env: fromRegistry }).then(() =>
      play(installs.get("file:// path in opencode.json")!),
    ),
    // The project installs the package; the drop-in's import finds it in the project's node_modules.
    npm(["install", "--ignore-scripts", `${NAME}@${VERSION}`], { cwd: dropIn.project.dir, env: fromRegistry }).then(() =>
      play(installs.get("drop-in in .opencode/plugin/")!),
    ),
  ]);
  // The TUIs start together; each test then waits for its own screen.
  for (const install of installs.values()) install.terminal = openTerminal(install.scenario.project.dir, ["--continue"]);
}, 180_000);

afterAll(async () => {
  for (const { terminal } of installs.values()) terminal?.close();
  await Promise.all([...installs.values()].map(({ scenario }) => scenario.close()));
  await registry?.stop();
  if (root !== "") rmSync(root, { recursive: true, force: true });
});

const bodyText = (request: RecordedRequest) => JSON.stringify(request.body);

for (const name of ["by name from a registry", "file:// path in opencode.json", "drop-in in .opencode/plugin/"]) {
  describe(`install: ${name}`, () => {
    const requests = () => installs.get(name)?.scenario.server.mainRequests() ?? [];

    test("the nested context file reaches the model after the command touches its directory, not before", () => {
      expect(requests()).toHaveLength(2);
      const [before, after] = requests() as [RecordedRequest, RecordedRequest];
      expect(bodyText(before)).toContain(ROOT.marker);
      expect(bodyText(before)).not.toContain(API.marker);
      expect(bodyText(after)).toContain(API.marker);
    });

    test("the TUI module loads from tui.json and its sidebar shows the file with the tokens of the session's record", async () => {
      const { recordsDir, terminal } = installs.get(name)!;
      const session = readdirSync(recordsDir).find((file) => /^[\w-]+\.jsonl$/.test(file))!.replace(/\.jsonl$/, "");
      const api = readRecords(recordsDir, session).at(-1)!.files.find((file) => file.path === API.path)!;
      const row = new RegExp(`${API.path.replaceAll(".", "\\.")}\\s+${formatTokens(api.tokens).replaceAll(".", "\\.")}\\s*$`, "m");
      await terminal!.waitFor((screen) => row.test(screen), `${name}: the sidebar row of ${API.path}`);
    }, 70_000);
  });
}

test("file://: both modules used the recordsDir option, nothing went to the default directory", () => {
  const scenario = installs.get("file:// path in opencode.json")!.scenario;
  expect(existsSync(defaultRecordsDir(scenario))).toBe(false);
});

test("by name: OpenCode installed the published package from the registry", () => {
  const scenario = installs.get("by name from a registry")!.scenario;
  const packages = join(homeOf(scenario), ".cache/opencode/packages");
  const installed = readdirSync(packages)
    .map((dir) => join(packages, dir, "node_modules", NAME, "package.json"))
    .filter((path) => existsSync(path));
  // OpenCode may keep the spec it installed under more than one name (`name`, `name@latest`): each is this version.
  expect(installed.length).toBeGreaterThan(0);
  for (const path of installed) expect((JSON.parse(readFileSync(path, "utf8")) as { version: string }).version).toBe(VERSION);
});

test("the package holds dist/, README, LICENSE and CHANGELOG only", () => {
  const listing = spawnSync("tar", ["-tzf", tarball], { encoding: "utf8" }).stdout.trim().split("\n");
  const top = new Set(listing.map((path) => path.replace(/^package\//, "").split("/")[0]));
  expect([...top].sort()).toEqual(["CHANGELOG.md", "LICENSE", "README.md", "dist", "package.json"]);
});

test("the bin runs explain on plain Node, with no Bun on the PATH", () => {
  // A PATH with node and the system's tools only.
  const bin = join(root, "node-only-bin");
  mkdirSync(bin, { recursive: true });
  symlinkSync(nodeBinary(), join(bin, "node"));
  const path = [bin, "/usr/bin", "/bin"].filter((dir) => !existsSync(join(dir, "bun"))).join(":");
  const project = installs.get("drop-in in .opencode/plugin/")!.scenario.project.dir;
  const cli = join(project, "node_modules/.bin", NAME);
  const env = { PATH: path, HOME: root };
  expect(spawnSync("sh", ["-c", "command -v bun"], { env }).status).not.toBe(0);

  const version = spawnSync(cli, ["--version"], { env, encoding: "utf8" });
  expect(version.stdout.trim()).toBe(VERSION);
  const explain = spawnSync(cli, ["explain", project, "--worktree", project, "--touch", "packages/api/src/handlers/users.ts"], { env, encoding: "utf8" });
  expect(explain.stderr).toBe("");
  expect(explain.status).toBe(0);
  expect(explain.stdout).toContain("packages/api/AGENTS.md");
  expect(explain.stdout).toContain(API.marker);
});
