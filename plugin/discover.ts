import { dirname } from "node:path";
import { isInside } from "./paths.ts";

/** The directories a walk from `startDir` visits, closest first: itself, then up to `maxDepth` parents, never above `stopAt`. */
export function walkUp(startDir: string, stopAt: string, maxDepth: number): string[] {
  if (!isInside(startDir, stopAt)) return [];
  const dirs = [startDir];
  let dir = startDir;
  while (dir !== stopAt && dirs.length <= maxDepth) {
    dir = dirname(dir);
    dirs.push(dir);
  }
  return dirs;
}

/**
 * The context files along a walk (`walk`, closest first, as `walkUp` gives it), root first,
 * closest last. A file with `root: true` ends the walk: nothing above its directory applies.
 * `lookup` answers for one directory (the cache does).
 */
export async function discover<F extends { root: boolean }>(walk: readonly string[], lookup: (dir: string) => Promise<F | null>): Promise<F[]> {
  const files = await Promise.all(walk.map(lookup));
  const chain: F[] = [];
  for (const file of files) {
    if (file === null) continue;
    chain.push(file);
    if (file.root) break;
  }
  return chain.reverse();
}
