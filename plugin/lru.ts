import { LRUCache } from "lru-cache";

const ONE = () => 1;

/**
 * A least-recently-used cache of at most `entries` entries, whose tables grow as it fills. Given
 * `max`, lru-cache allocates them for every entry at construction: the store's three caches (8-16 K
 * entries each) took 2.2-2.6 ms of start-up and 5 MiB of RSS before a directory was read (Bun 1.4.5).
 * The same bound kept as a size, each entry of size 1, allocates nothing ahead.
 */
export function lruCache<K extends {}, V extends {}>(entries: number, options: Omit<LRUCache.Options<K, V, unknown>, "max" | "maxSize" | "sizeCalculation"> = {}): LRUCache<K, V> {
  return new LRUCache<K, V>({ ...options, maxSize: entries, sizeCalculation: ONE });
}
