import { lstatSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, normalize, sep } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { safePath } from "../src/adapters/filesystem.js";
import { WorkspacePathError } from "../src/core/filesystem.js";
import { workspaceSegments } from "../src/core/safe-path.js";

const RUNS = 200;
const posix = process.platform !== "win32";

let suiteRoot = "";
beforeAll(() => {
  suiteRoot = realpathSync(mkdtempSync(join(tmpdir(), "ch02-properties-")));
});
afterAll(() => {
  rmSync(suiteRoot, { recursive: true, force: true });
});

const isInside = (ws: string, candidate: string): boolean => candidate === ws || candidate.startsWith(ws + sep);

/**
 * The independent check: `resolved` is `ws` or below it with no `.`/`..`/empty segment, and every component
 * of it that exists on disk (links followed, dangling links refused) has a real path inside `ws`.
 */
function landsInside(ws: string, resolved: string): string | undefined {
  if (!isInside(ws, resolved)) return `not under the workspace: ${resolved}`;
  if (normalize(resolved) !== resolved || resolved.endsWith(sep) !== ws.endsWith(sep)) {
    return `not normalised: ${resolved}`;
  }
  let current = ws;
  for (const part of resolved
    .slice(ws.length)
    .split(sep)
    .filter((segment) => segment !== "")) {
    current = join(current, part);
    try {
      lstatSync(current);
    } catch {
      return undefined; // Missing from here on: writing creates plain folders, following nothing.
    }
    let real: string;
    try {
      real = realpathSync(current);
    } catch {
      return `goes through a dangling link: ${current}`;
    }
    if (!isInside(ws, real)) return `${current} is really ${real}`;
  }
  return undefined;
}

type Attempt = { path: string } | { refused: "by the text" | "by the disk" };

/**
 * Calls `safePath`. A refusal must be a `WorkspacePathError` saying exactly `Path escapes workspace: <path>`
 * (cut to 200 characters); anything else thrown is a failure. Says which check refused it.
 */
async function attempt(ws: string, relative: string): Promise<Attempt> {
  try {
    return { path: await safePath(ws, relative) };
  } catch (error) {
    if (!(error instanceof WorkspacePathError)) throw error;
    const shown = relative.length <= 200 ? relative : `${relative.slice(0, 200)}…`;
    expect(error.message).toBe(`Path escapes workspace: ${shown}`);
    let lexical = true;
    try {
      workspaceSegments(relative);
      lexical = false;
    } catch {
      // The first check refuses it on its own.
    }
    return { refused: lexical ? "by the text" : "by the disk" };
  }
}

const SEGMENTS = [
  "..",
  ".",
  "",
  "a",
  "b",
  "sub",
  "deeper",
  "link",
  "l1",
  "l2",
  "l3",
  "outside",
  "ws",
  "secret.txt",
  "x.txt",
  "\u2025",
  "\uff0e\uff0e",
  "..\u2215..",
  "..\uff0f..",
  "%2e%2e",
  "...",
  "con",
  "a.txt:s",
] as const;
const SEPARATORS = ["/", "\\", "//", "\\/", "/./"] as const;
const LINK_PLACES = ["link", "l1", "a/l2", "sub/l3", "sub/deeper/l4"] as const;

/** Where a link may point: relative and absolute, inside, outside, at a file, at nothing, at another link. */
function linkTargets(root: string): string[] {
  return [
    "..",
    "../..",
    "../outside",
    "../outside/secret.txt",
    "../outside/missing",
    "/",
    ".",
    "a",
    "sub",
    "sub/deeper",
    "../ws",
    "../ws-sibling",
    "nonexistent",
    "l1",
    "link",
    join(root, "outside"),
    join(root, "ws"),
    join(root, "ws", "sub"),
  ];
}

const anyPath = fc
  .array(fc.tuple(fc.constantFrom(...SEPARATORS), fc.constantFrom(...SEGMENTS)), { maxLength: 8 })
  .chain((parts) =>
    fc
      .boolean()
      .map((leading) =>
        parts.map(([separator, segment], i) => (i === 0 && !leading ? "" : separator) + segment).join(""),
      ),
  );

/** Paths the first check lets through, so that the links decide: most of `anyPath` is refused by its text alone. */
const textuallyFine = fc
  .array(
    fc.constantFrom("link", "l1", "a", "l2", "sub", "l3", "deeper", "l4", "outside", "ws", "secret.txt", "x.txt"),
    {
      minLength: 1,
      maxLength: 5,
    },
  )
  .map((segments) => segments.join("/"));

const relativePath = fc.oneof({ arbitrary: anyPath, weight: 1 }, { arbitrary: textuallyFine, weight: 2 });

describe.skipIf(!posix)("safePath against random paths and random symlink layouts", () => {
  let run = 0;

  /** A fresh workspace beside `outside/` and a prefix sibling, with `links` made inside it. */
  function layout(links: readonly (readonly [string, number])[]): { ws: string; root: string } {
    run += 1;
    const root = join(suiteRoot, `run-${run}`);
    const ws = join(root, "ws");
    mkdirSync(join(ws, "a"), { recursive: true });
    mkdirSync(join(ws, "sub", "deeper"), { recursive: true });
    mkdirSync(join(root, "outside"));
    mkdirSync(join(root, "ws-sibling"));
    writeFileSync(join(root, "outside", "secret.txt"), "secret");
    writeFileSync(join(ws, "x.txt"), "inside");
    const targets = linkTargets(root);
    for (const [place, target] of links) symlinkSync(targets[target % targets.length] ?? ".", join(ws, place));
    return { ws, root };
  }

  const links = fc.uniqueArray(fc.tuple(fc.constantFrom(...LINK_PLACES), fc.nat()), {
    maxLength: 4,
    selector: ([place]) => place,
  });

  it("never returns a path whose existing part really lies outside the workspace", async () => {
    const seen = { resolved: 0, resolvedThroughLink: 0, refusedByText: 0, refusedByDisk: 0 };
    await fc.assert(
      fc.asyncProperty(links, fc.array(relativePath, { minLength: 1, maxLength: 6 }), async (made, paths) => {
        const { ws, root } = layout(made);
        try {
          for (const relative of paths) {
            const outcome = await attempt(ws, relative);
            if ("refused" in outcome) {
              seen[outcome.refused === "by the text" ? "refusedByText" : "refusedByDisk"] += 1;
              continue;
            }
            expect(landsInside(ws, outcome.path)).toBeUndefined();
            seen.resolved += 1;
            if (made.some(([place]) => relative.replace(/[\\/]+/g, "/").includes(place))) seen.resolvedThroughLink += 1;
          }
        } finally {
          rmSync(root, { recursive: true, force: true });
        }
      }),
      { numRuns: RUNS },
    );
    // The run explored both sides of the boundary, links included, and both checks refused something.
    expect(Math.min(...Object.values(seen))).toBeGreaterThan(0);
  });

  it("without links, agrees with a lexical model: inside when no segment is `..`, else refused", async () => {
    const { ws } = layout([]);
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.constantFrom(...SEPARATORS), fc.constantFrom("..", ".", "a", "b", "sub", "new")), {
          maxLength: 10,
        }),
        async (parts) => {
          const relative = parts.map(([separator, segment], i) => (i === 0 ? "" : separator) + segment).join("");
          const segments = parts.map(([, segment]) => segment);
          // Chapter 2 never simplifies a path: one `..` anywhere refuses it, even `a/../b`; so does a path that
          // names the workspace folder itself ("", ".", "./.").
          const refused = segments.includes("..") || segments.every((segment) => segment === ".");
          const outcome = await attempt(ws, relative);
          if (refused) {
            expect(outcome).toEqual({ refused: "by the text" });
          } else {
            expect(outcome).toEqual({ path: join(ws, ...segments.filter((segment) => segment !== ".")) });
          }
        },
      ),
      { numRuns: RUNS },
    );
  });

  it("any string at all either resolves inside the workspace or is refused with a WorkspacePathError", async () => {
    // link -> ../outside, l1 -> a (inside), a/l2 -> ../outside/secret.txt (relative to a/, so dangling).
    const { ws } = layout([
      ["link", 2],
      ["l1", 7],
      ["a/l2", 3],
    ]);
    const tricky = fc.constantFrom(
      ".",
      "..",
      "/",
      "\\",
      ":",
      "C",
      "\u0000",
      "\u001f",
      "\u0085",
      "\u2025",
      "\uff0e",
      "\uff0f",
      "\u2215",
      " ",
      "%",
      "~",
      "link",
      "lf",
      "l1",
      "a",
    );
    await fc.assert(
      fc.asyncProperty(
        fc.string({ unit: fc.oneof(tricky, fc.string({ unit: "grapheme", maxLength: 1 })), maxLength: 24 }),
        async (relative) => {
          const outcome = await attempt(ws, relative);
          if ("path" in outcome) expect(landsInside(ws, outcome.path)).toBeUndefined();
        },
      ),
      { numRuns: RUNS },
    );
  });
});
