import { dirname } from "node:path";
import { isInside } from "../paths.ts";

/**
 * The directories a walk from `startDir` visits, closest first: itself, then its parents up to
 * `maxDepth` levels above it, never above `stopAt`. Pure path work (find-up style): `startDir` is
 * already a real path, so its lexical parents are the real ones.
 */
export function walkUp(startDir: string, stopAt: string, maxDepth: number): string[] {
  if (!isInside(startDir, stopAt)) return [];
  const dirs = [startDir];
  for (let dir = startDir; dir !== stopAt && dirs.length <= maxDepth; ) {
    dir = dirname(dir);
    dirs.push(dir);
  }
  return dirs;
}

/**
 * The chain rule: given what each directory of a walk holds (closest first, `null` for none),
 * the files that apply, root first. A file with `root: true` ends the walk: nothing above its
 * directory applies.
 */
export function chainOfWalk<F extends { readonly root: boolean }>(closestFirst: readonly (F | null)[]): F[] {
  const chain: F[] = [];
  for (const file of closestFirst) {
    if (file === null) continue;
    chain.push(file);
    if (file.root) break;
  }
  return chain.reverse();
}
