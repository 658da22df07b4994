import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { Inotify, type InotifyUser } from "../../plugin/files/inotify.ts";
import { Scratch } from "./helpers.ts";

const scratch = new Scratch();
const users: InotifyUser[] = [];
afterEach(() => {
  for (const user of users.splice(0)) Inotify.acquire(user)?.release(user);
  scratch.cleanup();
});

/** The shared instance for a test of its own, and what its watches heard (dir, name). */
function inotify() {
  const user: InotifyUser = { drained: () => {}, overflowed: () => {} };
  users.push(user);
  const heard: string[] = [];
  return { instance: Inotify.acquire(user)!, heard, listener: (dir: string, name: string) => heard.push(`${basename(dir)}:${name}`) };
}

describe.skipIf(process.platform !== "linux")("inotify watches", () => {
  test("one listener for many directories hears each with its own directory; closing one watch of a shared descriptor keeps the other", () => {
    const { instance, heard, listener } = inotify();
    const root = scratch.dir();
    for (const name of ["a", "b"]) mkdirSync(join(root, name));
    const a = instance.watch(join(root, "a"), listener);
    instance.watch(join(root, "b"), listener);
    // The same directory watched twice: one kernel descriptor, two watches.
    const again = instance.watch(join(root, "a"), (dir, name) => heard.push(`again ${basename(dir)}:${name}`));
    writeFileSync(join(root, "a", "AGENTS.md"), "x");
    writeFileSync(join(root, "b", "CLAUDE.md"), "y");
    instance.drain();
    expect([...new Set(heard)].sort()).toEqual(["a:AGENTS.md", "again a:AGENTS.md", "b:CLAUDE.md"]);
    heard.length = 0;
    a.close();
    a.close(); // twice: nothing more to undo
    writeFileSync(join(root, "a", "AGENTS.md"), "z");
    instance.drain();
    expect([...new Set(heard)]).toEqual(["again a:AGENTS.md"]);
    heard.length = 0;
    again.close();
    writeFileSync(join(root, "a", "AGENTS.md"), "w");
    instance.drain();
    expect(heard).toEqual([]);
  });

  test("the directory itself going is heard under its own name, and a closed watch of it is not asked back", () => {
    const { instance, heard, listener } = inotify();
    const root = scratch.dir();
    const gone = join(root, "gone");
    mkdirSync(gone);
    const watch = instance.watch(gone, listener);
    rmdirSync(gone);
    instance.drain();
    expect(heard).toContain("gone:gone");
    watch.close();
    expect(() => watch.close()).not.toThrow();
  });
});

describe.skipIf(process.platform !== "linux")("inotify: is a watch alive", () => {
  test("a live watch is; one whose directory was deleted and made again is not, whatever its inode number, and asking adds no watch", () => {
    const { instance, heard, listener } = inotify();
    const root = scratch.dir();
    const dir = join(root, "pkg");
    mkdirSync(dir);
    const watch = instance.watch(dir, listener);
    expect(instance.alive(watch)).toBe(true);
    writeFileSync(join(dir, "AGENTS.md"), "x");
    instance.drain();
    expect(heard).toContain("pkg:AGENTS.md");
    // Deleted and made again with no drain in between (as when the queue overflowed and its events were lost).
    rmSync(dir, { recursive: true });
    mkdirSync(dir);
    expect(instance.alive(watch)).toBe(false);
    writeFileSync(join(dir, "CLAUDE.md"), "y");
    instance.drain();
    // The probe's own watch was let go at once: nothing hears the new directory until it is watched again.
    expect(heard.filter((line) => line === "pkg:CLAUDE.md")).toEqual([]);
  });
});
