// Reply-size cap: the CPU cost of reading a provider's reply through chapter 4's boundedFetch (a TransformStream
// counting decoded bytes against MAX_REPLY_BYTES, a per-attempt deadline timer, the Retry-After check) next to plain
// fetch, the path without the cap.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import {
  boundedFetch,
  MAX_REPLY_BYTES,
  ProviderReplyError,
} from "../../code/chapters/ch04/src/adapters/bounded-fetch.js";
import { cpuNs, nowNs, ratioOfMedians, rounds, summarize } from "./stats.js";
import { formatValue, ratioText, type Row } from "./table.js";

const SERVER = fileURLToPath(new URL("./reply-child.ts", import.meta.url));
const REPO = fileURLToPath(new URL("../../", import.meta.url));
const SMALL = 2 * 1024;
const LARGE = 16 * 1024 * 1024;
/** As OpenAIChatModel builds it: its default per-attempt timeout, the default cap. */
const bounded = boundedFetch({ deadlineMs: 120_000 });

export async function benchReplyCap(options: {
  readonly smallRuns: number;
  readonly smallBatch: number;
  readonly largeRuns: number;
}): Promise<{ rows: Row[]; notes: string[] }> {
  const server = await startServer([SMALL, LARGE]);
  try {
    const url = (bytes: number, encoding: "plain" | "gzip"): string => `${server.baseURL}/${bytes}/${encoding}`;
    // Check the scenario before timing it: both paths read the whole body, and the cap really cuts.
    for (const size of [SMALL, LARGE]) {
      for (const encoding of ["plain", "gzip"] as const) {
        for (const read of [fetch, bounded]) await readAll(read, url(size, encoding), size);
      }
    }
    let cut = false;
    try {
      await readAll(boundedFetch({ deadlineMs: 120_000, maxBytes: LARGE / 2 }), url(LARGE, "gzip"), LARGE);
    } catch (error) {
      cut = error instanceof ProviderReplyError || (error as Error).cause instanceof ProviderReplyError;
    }
    if (!cut) throw new Error(`reply bench: a ${LARGE / 2}-byte cap let a ${LARGE}-byte reply through`);

    // Each sample is CPU time per reply (this process only: the server is another); wall time is kept beside it.
    const perReply =
      (read: typeof fetch, size: number, encoding: "plain" | "gzip", count: number, wall: number[]) =>
      async (): Promise<number> => {
        const cpu = cpuNs();
        const start = nowNs();
        for (let i = 0; i < count; i += 1) await readAll(read, url(size, encoding), size);
        wall.push((nowNs() - start) / count);
        return (cpuNs() - cpu) / count;
      };
    const rows: Row[] = [];
    const walls: string[] = [];
    for (const [size, label, runs, count] of [
      [SMALL, "2 KiB", options.smallRuns, options.smallBatch],
      [LARGE, "16 MiB", options.largeRuns, 1],
    ] as const) {
      for (const encoding of ["plain", "gzip"] as const) {
        const wall = { fetch: [] as number[], bounded: [] as number[] };
        const samples = await rounds(
          {
            fetch: perReply(fetch, size, encoding, count, wall.fetch),
            bounded: perReply(bounded, size, encoding, count, wall.bounded),
          },
          { runs, warmup: 1 },
        );
        const extra = summarize(samples.bounded).median - summarize(samples.fetch).median;
        rows.push(
          {
            name: `reply cap ${label} ${encoding}, CPU per reply: fetch (unchecked)`,
            kind: "time",
            value: summarize(samples.fetch),
          },
          {
            name: `reply cap ${label} ${encoding}, CPU per reply: boundedFetch`,
            kind: "time",
            value: summarize(samples.bounded),
            ratio: `${ratioText(ratioOfMedians(samples.bounded, samples.fetch), "fetch")} (${extra < 0 ? "−" : "+"}${formatValue(Math.abs(extra), "time")})`,
          },
        );
        // The warm-up round recorded a wall time too; keep the counted rounds only.
        const [plainWall, boundedWall] = [wall.fetch.slice(-runs), wall.bounded.slice(-runs)];
        walls.push(
          `${label} ${encoding} ${formatValue(summarize(plainWall).median, "time")} → ${formatValue(summarize(boundedWall).median, "time")} (${ratioOfMedians(boundedWall, plainWall).toFixed(2)}×)`,
        );
      }
    }
    return {
      rows,
      notes: [
        `reply cap: CPU time of the bench process per reply read to its end (arrayBuffer; no JSON.parse, the same on both paths) from a loopback node:http server in its own process (scripts/bench/reply-child.ts; bodies made and gzipped once); ${options.smallBatch} small replies or 1 large one per sample; boundedFetch as OpenAIChatModel makes it (cap ${MAX_REPLY_BYTES / 2 ** 20} MiB, 120 s deadline); checked first that a ${LARGE / 2 ** 21} MiB cap stops the ${LARGE / 2 ** 20} MiB reply.`,
        `reply cap: wall time per reply, median, fetch → boundedFetch: ${walls.join("; ")}.`,
      ],
    };
  } finally {
    await server.close();
  }
}

/** Reads one reply to its last byte and checks its decoded size. */
async function readAll(read: typeof fetch, url: string, bytes: number): Promise<void> {
  const response = await read(url);
  const body = await response.arrayBuffer();
  if (response.status !== 200 || body.byteLength !== bytes) {
    throw new Error(`reply bench: HTTP ${response.status}, ${body.byteLength} bytes instead of ${bytes}`);
  }
}

/** Starts reply-child.ts and waits for the base URL it prints; closing its stdin ends it. */
async function startServer(sizes: readonly number[]): Promise<{ baseURL: string; close(): Promise<void> }> {
  const child = spawn(process.execPath, ["--import", "tsx", SERVER, ...sizes.map(String)], {
    cwd: REPO,
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const baseURL = await new Promise<string>((resolve, reject) => {
    let text = "";
    child.stdout.on("data", (chunk: Buffer) => {
      text += chunk.toString("utf8");
      if (text.includes("\n")) resolve(text.trim());
    });
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`reply server exited early with ${code}`)));
  });
  return {
    baseURL,
    close: () => {
      child.stdin.end();
      return exited;
    },
  };
}
