// A second process on the same workspace's .memory, for the cross-process tests of tests/memory.test.ts.
// Usage: node --import tsx memory-writer.ts write <workspace> <prefix> <count>
//          adds <prefix>-0 … <prefix>-<count - 1>, one commit each, then prints "done"
//        node --import tsx memory-writer.ts hold <workspace> <release file>
//          takes .memory/.lock as the store does, prints "held", and releases it once <release file> exists
import { existsSync } from "node:fs";
import { join } from "node:path";
import { withFileLock } from "../../src/adapters/file-lock.js";
import { LOCK_STALE_MS, LOCK_UPDATE_MS, MemoryRecord, MemoryStore, MemoryType } from "../../src/features/memory.js";

const [mode, workspace = "", arg = "", count = "0"] = process.argv.slice(2);

if (mode === "write") {
  const store = new MemoryStore({ workspace });
  for (let index = 0; index < Number(count); index += 1) {
    const name = `${arg}-${index}`;
    await store.add(
      new MemoryRecord({ name, description: `${name} description`, kind: MemoryType.PROJECT, body: `${name} body` }),
    );
  }
  process.stdout.write("done\n");
} else if (mode === "hold") {
  const folder = join(workspace, ".memory");
  await withFileLock(
    folder,
    { lockfilePath: join(folder, ".lock"), stale: LOCK_STALE_MS, update: LOCK_UPDATE_MS, retryMs: 10 },
    async () => {
      process.stdout.write("held\n");
      while (!existsSync(arg)) await new Promise((resolve) => setTimeout(resolve, 10));
    },
  );
  process.stdout.write("released\n");
} else {
  throw new Error(`unknown mode ${String(mode)}`);
}
