import { existsSync, readdirSync, readFileSync } from "node:fs";

/** RSS (bytes) of the descendants of process `root` (and of `root` itself with `withRoot`), from Linux /proc; 0 elsewhere. */
export function treeRss(root: number, withRoot: boolean): number {
  if (!existsSync("/proc/self/stat")) return 0;
  const read = (path: string) => { try { return readFileSync(path, "utf8"); } catch { return ""; } }; // a process may exit meanwhile
  const children = new Map<number, number[]>();
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    const stat = read(`/proc/${pid}/stat`);
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), Number(pid)]);
  }
  let total = 0;
  for (let queue = withRoot ? [root] : [...(children.get(root) ?? [])]; queue.length > 0; ) {
    const pid = queue.pop() as number;
    total += Number(/VmRSS:\s+(\d+)/.exec(read(`/proc/${pid}/status`))?.[1] ?? 0) * 1024;
    queue.push(...(children.get(pid) ?? []));
  }
  return total;
}
