import { expect, test } from "bun:test";
import { lruCache } from "../plugin/lru.ts";

test("lruCache keeps at most its entries, evicting the least recently used (with the dispose callback)", () => {
  const evicted: string[] = [];
  const cache = lruCache<string, number>(3, { disposeAfter: (_value, key, reason) => reason === "evict" && evicted.push(key) });
  for (const key of ["a", "b", "c"]) cache.set(key, key.charCodeAt(0));
  expect(cache.get("a")).toBe(97);
  cache.set("d", 100);
  expect([...cache.keys()].sort()).toEqual(["a", "c", "d"]);
  expect(evicted).toEqual(["b"]);
  for (let i = 0; i < 1000; i++) cache.set(`k${i}`, i);
  expect(cache.size).toBe(3);
  expect([...cache.keys()].sort()).toEqual(["k997", "k998", "k999"]);
});
