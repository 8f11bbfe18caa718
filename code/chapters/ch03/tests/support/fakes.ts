import type { CommandResult, CommandRunner } from "../../src/core/commands.js";
import { PermissionDecision, type ApprovalProvider, type PermissionRequest } from "../../src/core/permissions.js";
import {
  FileNotFoundError,
  type GlobResult,
  type ReadPage,
  type WorkspaceFileSystem,
} from "../../src/core/workspace-fs.js";

/** A command that printed `output` and exited 0: the fields a `CommandResult` leaves unsaid, filled in. */
export function commandResult(fields: Partial<CommandResult> = {}): CommandResult {
  return { output: "a.txt", exitCode: 0, timedOut: false, truncated: false, ...fields };
}

/** One `run(command, cwd)` as the fake saw it. */
export interface RecordedCommand {
  readonly command: string;
  readonly cwd: string;
}

/** What a `FakeCommandRunner` answers: one fixed result, or a function of the call (which may throw). */
export type FakeAnswer = CommandResult | ((command: string, cwd: string, index: number) => CommandResult);

/** A `CommandRunner` that runs nothing: it records each `(command, cwd)` and answers a fixed or per-call result. */
export class FakeCommandRunner implements CommandRunner {
  readonly calls: RecordedCommand[] = [];

  constructor(private readonly answer: FakeAnswer = commandResult()) {}

  run(command: string, cwd: string): Promise<CommandResult> {
    const index = this.calls.length;
    this.calls.push({ command, cwd });
    try {
      return Promise.resolve(typeof this.answer === "function" ? this.answer(command, cwd, index) : this.answer);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }
}

/** A `FakeCommandRunner` whose every call rejects, as `PowerShellRunner` does when no process starts. */
export function unstartableRunner(): FakeCommandRunner {
  return new FakeCommandRunner(() => {
    throw new Error("spawn pwsh ENOENT");
  });
}

/** What an approval provider was shown, in a shape every chapter's tests can compare. */
export interface SeenApproval {
  readonly toolName: string;
  readonly reason: string;
  readonly arguments: unknown;
}

/**
 * An `ApprovalProvider` that counts its calls in `requests` and answers `answer` (a value, or a
 * function of what it was shown): `true` and `false` become allow and deny decisions from `user`;
 * anything else is returned as it is, so a non-decision such as `"yes"` reaches the policy unchanged.
 */
export class CountingApproval implements ApprovalProvider {
  readonly requests: SeenApproval[] = [];

  constructor(private readonly answer: unknown = true) {}

  async requestApproval(request: PermissionRequest, pending: PermissionDecision): Promise<PermissionDecision> {
    const seen = { toolName: request.toolName, reason: pending.reason, arguments: request.prepared.arguments };
    this.requests.push(seen);
    const answer: unknown =
      typeof this.answer === "function" ? await (this.answer as (seen: SeenApproval) => unknown)(seen) : this.answer;
    if (answer === true) return new PermissionDecision("allow", "Approved in the test", "user");
    if (answer === false) return new PermissionDecision("deny", "The user did not approve this tool call", "user");
    return answer as PermissionDecision;
  }
}

/** What a `WorkspaceFileSystem` was asked, method name first, in call order. */
export type SeenFileCall =
  | readonly ["readText", string, { offset: number; limit: number }]
  | readonly ["readWhole", string, number]
  | readonly ["writeText", string, string]
  | readonly ["glob", string, number];

/**
 * A `WorkspaceFileSystem` that touches no disk: files live in a map keyed by the model's own path,
 * `glob` lists every file whatever the pattern, and every call is recorded. Proves the file tools
 * go through the port they were given.
 */
export class FakeFileSystem implements WorkspaceFileSystem {
  readonly calls: SeenFileCall[] = [];
  readonly files: Map<string, string>;

  constructor(files: Record<string, string> = {}) {
    this.files = new Map(Object.entries(files));
  }

  readText(path: string, page: { offset: number; limit: number }): Promise<ReadPage> {
    this.calls.push(["readText", path, page]);
    const lines = this.#existing(path).split("\n");
    if (lines.at(-1) === "") lines.pop();
    const chosen = lines.slice(page.offset - 1, page.offset - 1 + page.limit);
    return Promise.resolve({
      text: chosen.join("\n"),
      firstLine: page.offset,
      lineCount: chosen.length,
      more: page.offset - 1 + page.limit < lines.length,
    });
  }

  readWhole(path: string, maxBytes: number): Promise<string> {
    this.calls.push(["readWhole", path, maxBytes]);
    return Promise.resolve(this.#existing(path));
  }

  writeText(path: string, content: string): Promise<{ readonly created: boolean }> {
    this.calls.push(["writeText", path, content]);
    const created = !this.files.has(path);
    this.files.set(path, content);
    return Promise.resolve({ created });
  }

  glob(pattern: string, limit: number): Promise<GlobResult> {
    this.calls.push(["glob", pattern, limit]);
    const paths = [...this.files.keys()].sort();
    return Promise.resolve({ paths: paths.slice(0, limit), capped: paths.length > limit });
  }

  #existing(path: string): string {
    const text = this.files.get(path);
    if (text === undefined) throw new FileNotFoundError(`${path} does not exist`);
    return text;
  }
}
