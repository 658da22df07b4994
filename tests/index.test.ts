import { join } from "node:path";
import { describe, expect, test } from "bun:test";
import * as entry from "../plugin/index.ts";
import { fakeClient, tempProject } from "./helpers/harness.ts";
import type { PluginInput } from "@opencode-ai/plugin";
import pkg from "../package.json";
import { VERSION } from "../plugin/version.ts";

describe("the package entry", () => {
  test("package.json points every entry at the built plugin, and the start-up log names the package's version", () => {
    expect(pkg.exports["."].import).toBe("./dist/plugin/index.js");
    expect(pkg.main).toBe(pkg.exports["."].import);
    // The built entry itself is loaded by OpenCode in tests/e2e/install.test.ts.
    expect(VERSION).toBe(pkg.version);
  });

  test("exports only the plugin: once by name and as the default, nothing else callable", () => {
    const exports = Object.entries(entry);
    expect(exports.map(([name]) => name).sort()).toEqual(["ProjectContext", "default"]);
    expect(entry.default).toBe(entry.ProjectContext);
  });

  test("a second call with the same input (both exports called) gets no hooks, so nothing is injected twice; start-up logs one line", async () => {
    const project = await tempProject("monorepo");
    const { client, logs } = fakeClient();
    const input = { client, directory: project.root, worktree: project.root } as unknown as PluginInput;
    const hooks = await entry.default(input);
    const again = await entry.ProjectContext(input);
    expect(Object.keys(hooks).length).toBeGreaterThan(0);
    expect(again).toEqual({});
    expect(logs.filter((log) => log.message.includes("started"))).toEqual([
      { service: "project-context", level: "info", message: `project-context ${VERSION} started: worktree ${project.root}, delivery stable, watcher ${process.platform === "linux" ? "inotify" : "fs.watch"}, records ${join(process.env.XDG_STATE_HOME!, "opencode-project-context")}` },
    ]);
    await hooks.dispose?.();
    await project.cleanup();
  });

  test("bad input never throws: the plugin disables itself and says so", async () => {
    const { client, logs } = fakeClient();
    expect(await entry.ProjectContext(null as unknown as PluginInput)).toEqual({});
    const hooks = await entry.ProjectContext({ client, directory: "/nonexistent/dir", worktree: "/nonexistent/dir" } as unknown as PluginInput);
    const output = { system: ["header"] };
    await hooks["experimental.chat.system.transform"]?.({ sessionID: "s", model: {} as never }, output);
    expect(output.system).toEqual(["header"]);
    await hooks.dispose?.();
    expect(logs.filter((log) => log.level === "error")).toEqual([]);
  });

  test("every hook survives bad arguments of every type without throwing", async () => {
    const project = await tempProject("monorepo");
    const { client } = fakeClient();
    const hooks = await entry.ProjectContext({ client, directory: project.root, worktree: project.root } as unknown as PluginInput);
    const bad: unknown[] = [undefined, null, 0, "", "x", [], {}, { sessionID: 5 }, { sessionID: "s", tool: {} }, { args: null }, { system: null }, { context: "x" }, { event: 7 }];
    for (const a of bad) {
      for (const b of bad) {
        const call = (name: keyof typeof hooks) => (hooks[name] as (x: unknown, y: unknown) => Promise<void>)(a, b);
        await call("tool.execute.before");
        await call("tool.execute.after");
        await call("experimental.chat.system.transform");
        await call("experimental.session.compacting");
        await call("event");
      }
    }
    await hooks.dispose?.();
    await project.cleanup();
  });
});
