import { randomBytes, randomUUID } from "node:crypto";
import { realpathSync } from "node:fs";
import { join } from "node:path";
import { isAlias, isMap, isScalar, parseDocument, stringify } from "yaml";
import { withFileLock, FileLockTimeoutError, type HeldLock } from "../adapters/file-lock.js";
import { openHeldFolder, type HeldFolder } from "../adapters/held-folder.js";
import { isWindowsReservedComponent } from "../core/filesystem.js";
import { hasHiddenCharacters } from "../core/hidden-characters.js";
import { TurnLifecycleRefusal, type TurnLifecycle } from "../core/loop.js";
import { isChatMessage, systemMessage, userMessage, validateToolPairing } from "../core/messages.js";
import type { ChatMessage } from "../core/messages.js";
import type { ModelClient, RequestPurpose } from "../core/model.js";
import { serializeTranscript } from "./compaction.js";

/** Lines one serialized memory file may have (the book's budget, frontmatter included). */
export const MAX_MEMORY_LINES = 200;
/** UTF-8 bytes one serialized memory file may have (the book's budget, frontmatter included). */
export const MAX_MEMORY_BYTES = 4_096;
export const DEFAULT_MAX_INDEX_LINES = 200;
export const DEFAULT_MAX_INDEX_BYTES = 4_096;
export const DEFAULT_MAX_SELECTED = 5;
export const DEFAULT_CONSOLIDATE_THRESHOLD = 10;
/** Fallback tokens: runs of ASCII letters and digits at least this long (Han text goes by pairs). */
export const MIN_KEYWORD_LENGTH = 3;
export const MAX_MEMORY_NAME_LENGTH = 64;
export const MAX_MEMORY_DESCRIPTION_CHARS = 200;
export const MAX_MANIFEST_BYTES = 65_536;
export const MAX_SIDE_QUERY_REPLY_BYTES = 1_048_576;
export const DEFAULT_MAX_EXTRACTION_BYTES = 1_048_576;
/** proper-lockfile's `stale` and `update` (the book's 30 s and 10 s). */
export const LOCK_STALE_MS = 30_000;
export const LOCK_UPDATE_MS = 10_000;
/** Ours: longer than `stale`, so a lock a crashed process left is always taken over within one wait. */
export const DEFAULT_LOCK_WAIT_MS = 40_000;
export const LOCK_RETRY_MS = 50;
/** After this long waiting for the lock, `onLockWait` says so. */
export const LOCK_WAIT_NOTICE_MS = 1_000;

/** The book's closing sentence of every side-query prompt: the whole reply goes to JSON.parse, fences included. */
export const NO_FENCE_INSTRUCTION =
  "直接输出纯 JSON 文本，禁止使用 Markdown 代码块或反引号包裹，禁止输出任何解释文字。";

export const SELECTOR_SYSTEM_PROMPT =
  "Choose the saved memories that bear directly on the user's query. The user message is a JSON object: query is " +
  'the query, and catalog lists one memory per line as "- [name](file) - description". Reply with a JSON array of ' +
  "memory names copied exactly from the catalog, most relevant first, at most 5, or [] when none is relevant. Reply " +
  "with the JSON only: no code fence, no explanation, no tool call. " +
  NO_FENCE_INSTRUCTION;

export const EXTRACTOR_SYSTEM_PROMPT =
  "From the conversation, extract what is worth remembering in later sessions: who the user is and what they prefer " +
  "(user), how to work and what went wrong (feedback), what is happening in the project (project), where things are " +
  "found (reference). The user message is a JSON object: conversation holds the messages, existing_catalog the " +
  "memories already saved. Reply with a JSON array, [] when nothing new is worth keeping. Each item has exactly the " +
  "keys name, type, description and body: name a new lowercase slug (a-z, 0-9, single hyphens, at most 64 " +
  "characters, no name from the catalog); type one of user, feedback, project, reference; description one line of " +
  "at most 200 characters; body the details, well under 4,000 bytes. Never save secrets, keys or passwords, nor what " +
  "matters only to this task. Reply with the JSON only: no code fence, no explanation, no tool call. " +
  NO_FENCE_INSTRUCTION;

export const CONSOLIDATOR_SYSTEM_PROMPT =
  "Merge the saved memories below where they repeat or contradict each other. The user message is a JSON array of " +
  "memories, each with name, type, description and body. Reply with one JSON object with exactly the keys " +
  "source_names and records: source_names lists the names your records replace (at least one, each from the input, " +
  "none twice); records holds the memories that replace them (at least one), each with exactly name, type, " +
  "description and body. Memories you do not list in source_names are kept unchanged. Reply with the JSON only: no " +
  "code fence, no explanation, no tool call. " +
  NO_FENCE_INSTRUCTION;

/** The session's three failures, as the book words them; the reason travels in the notice. */
export const EXTRACTION_FAILED = "Memory extraction failed";
export const SELECTION_FAILED = "Memory selection failed; deterministic fallback used";
export const CONSOLIDATION_FAILED = "Memory consolidation failed";

/** The four kinds of memory: a closed set, so the model cannot invent a classification per run. */
export const MemoryType = Object.freeze({
  USER: "user",
  FEEDBACK: "feedback",
  PROJECT: "project",
  REFERENCE: "reference",
} as const);
export type MemoryType = (typeof MemoryType)[keyof typeof MemoryType];
const MEMORY_TYPES: readonly string[] = Object.values(MemoryType);

/** A memory, a file or the store is not what the contract allows. Its message names no absolute path. */
export class MemoryStoreError extends Error {
  override readonly name: string = "MemoryStoreError";
}

/** The store's lock could not be taken (held by another process past the wait, or the disk refuses it). */
export class MemoryLockError extends MemoryStoreError {
  override readonly name = "MemoryLockError";
}

/** `beginTurn`'s refusal to start a run over a store that cannot be read; the loop passes it on unwrapped. */
export class MemoryUnreadableError extends TurnLifecycleRefusal {
  override readonly name = "MemoryUnreadableError";
}

const SLUG = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
const MAX_ID_LENGTH = 32;
const MAX_FILE_NAME_LENGTH = 100;
const FILE_NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*\.md$/;
/** Characters that are not text on one line: controls, lone surrogates, and what `hasHiddenCharacters` finds. */
const CONTROL_OR_SURROGATE = /[\p{Cc}\p{Cs}]/u;
/** A body may hold line ends and tabs, and no other control character. */
const BODY_CONTROL = /(?![\n\t])[\p{Cc}\p{Cs}]/u;
const TAG = /<\/?relevant_memories/i;
const NAME_ERROR = "memory name must be a safe lowercase slug";
const HIDDEN_ERROR = "memory text must not contain control or hidden characters";
const ESCAPES = "memory root escapes workspace";
const LOCKED = "memory store is locked by another process; if none is running, remove .memory/.lock";
const MEMORY_FOLDER = ".memory";
const MANIFEST = "manifest.json";
const INDEX = "MEMORY.md";
const LOCK = ".lock";

/** One memory: checked whole when it is made, and frozen. `kind` is `type` on disk and in JSON. */
export class MemoryRecord {
  readonly name: string;
  readonly description: string;
  readonly kind: MemoryType;
  readonly body: string;

  constructor(fields: { name: string; description: string; kind: MemoryType; body: string }) {
    const { name, description, kind, body } = fields;
    if (
      typeof name !== "string" ||
      name.length > MAX_MEMORY_NAME_LENGTH ||
      !SLUG.test(name) ||
      isWindowsReservedComponent(name)
    ) {
      throw new MemoryStoreError(NAME_ERROR);
    }
    if (typeof description !== "string" || description.trim() === "" || /[\r\n\u2028\u2029]/.test(description)) {
      throw new MemoryStoreError("memory description must be one line of 1 to 200 characters");
    }
    if (CONTROL_OR_SURROGATE.test(description) || hasHiddenCharacters(description)) {
      throw new MemoryStoreError(HIDDEN_ERROR);
    }
    if (Array.from(description).length > MAX_MEMORY_DESCRIPTION_CHARS) {
      throw new MemoryStoreError("memory description must be one line of 1 to 200 characters");
    }
    if (typeof kind !== "string" || !MEMORY_TYPES.includes(kind)) {
      throw new MemoryStoreError("memory kind must be a MemoryType: user, feedback, project or reference");
    }
    if (typeof body !== "string") throw new MemoryStoreError("memory body must not be empty");
    const text = withoutBlankEnds(body);
    if (text === "") throw new MemoryStoreError("memory body must not be empty");
    if (BODY_CONTROL.test(text) || hasHiddenCharacters(text)) throw new MemoryStoreError(HIDDEN_ERROR);
    if (TAG.test(description) || TAG.test(text)) {
      throw new MemoryStoreError("memory text must not contain the relevant_memories tag");
    }
    this.name = name;
    this.description = description;
    this.kind = kind;
    this.body = text;
    checkFileBudget(serializeMemoryRecord(this));
    Object.freeze(this);
  }
}

/** The body with LF line ends and without blank lines before or after the text. */
function withoutBlankEnds(body: string): string {
  const lines = body.replace(/\r\n?/g, "\n").split("\n");
  while (lines.length > 0 && (lines[0] as string).trim() === "") lines.shift();
  while (lines.length > 0 && (lines[lines.length - 1] as string).trim() === "") lines.pop();
  return lines.join("\n");
}

/** Lines as an editor counts them: each `\n`, `\r\n` or `\r`, and one more for a last line without one. */
function lineCount(text: string): number {
  const ends = text.match(/\r\n|\r|\n/g)?.length ?? 0;
  return ends + (text !== "" && !/[\r\n]$/.test(text) ? 1 : 0);
}

function checkFileBudget(text: string): void {
  if (lineCount(text) > MAX_MEMORY_LINES) {
    throw new MemoryStoreError(`memory file must not exceed ${MAX_MEMORY_LINES} lines`);
  }
  if (Buffer.byteLength(text, "utf8") > MAX_MEMORY_BYTES) {
    throw new MemoryStoreError(`memory file must not exceed ${MAX_MEMORY_BYTES} UTF-8 bytes`);
  }
}

/** A YAML scalar on one line (no folding, no block scalar), quoted only where YAML would read it as something else. */
const yamlScalar = (value: string): string => stringify(value, { lineWidth: 0, blockQuote: false }).replace(/\n$/, "");

/** The file's exact bytes: frontmatter with the keys in this order, a blank line, the body, a final newline. */
export function serializeMemoryRecord(record: MemoryRecord): string {
  return (
    `---\nname: ${yamlScalar(record.name)}\ndescription: ${yamlScalar(record.description)}\n` +
    `type: ${record.kind}\n---\n\n${record.body}\n`
  );
}

/**
 * A memory file's text back into its record, checked by the same constructor. The frontmatter is plain YAML data
 * (no aliases, anchors, tags, merge keys, duplicate keys or second document) with exactly `name`, `description` and
 * `type`, and the file name must be `<name>-<id>.md`. One leading BOM and CRLF line ends are accepted.
 */
export function parseMemoryRecord(text: string, fileName: string): MemoryRecord {
  const invalid = (why: string): MemoryStoreError =>
    new MemoryStoreError(`memory file is invalid: ${MEMORY_FOLDER}/${fileName}: ${why}`);
  const content = text.startsWith("\uFEFF") ? text.slice(1) : text;
  try {
    checkFileBudget(content);
  } catch (error) {
    throw invalid((error as Error).message);
  }
  const lines = content.replace(/\r\n?/g, "\n").split("\n");
  const closing = lines.indexOf("---", 1);
  if (lines[0] !== "---" || closing === -1) throw invalid("it must begin with --- frontmatter ---");
  const fields = frontmatterFields(lines.slice(1, closing).join("\n"), invalid);
  let record: MemoryRecord;
  try {
    record = new MemoryRecord({
      name: fields.name,
      description: fields.description,
      kind: fields.type as MemoryType,
      body: lines.slice(closing + 1).join("\n"),
    });
  } catch (error) {
    throw invalid((error as Error).message);
  }
  const id = fileName.slice(record.name.length + 1, -".md".length);
  if (!fileName.startsWith(`${record.name}-`) || !fileName.endsWith(".md") || !isId(id)) {
    throw invalid(`the file name must be ${record.name}-<id>.md`);
  }
  return record;
}

function frontmatterFields(
  yamlText: string,
  invalid: (why: string) => MemoryStoreError,
): { name: string; description: string; type: string } {
  const notData = (): MemoryStoreError => invalid("the frontmatter is not plain YAML");
  let document: ReturnType<typeof parseDocument>;
  try {
    document = parseDocument(yamlText, {
      version: "1.2",
      schema: "core",
      merge: false,
      uniqueKeys: false,
      logLevel: "error",
      prettyErrors: false,
    });
  } catch {
    throw notData();
  }
  const map = document.contents;
  if (document.errors.length > 0 || document.warnings.length > 0 || !isMap(map) || map.tag || map.anchor) {
    throw notData();
  }
  const values = new Map<string, unknown>();
  for (const { key, value } of map.items) {
    for (const node of [key, value]) {
      if (isAlias(node) || !isScalar(node) || node.tag !== undefined || node.anchor !== undefined) throw notData();
    }
    const name = (key as { value: unknown }).value;
    if (typeof name !== "string" || values.has(name)) throw notData();
    values.set(name, (value as { value: unknown }).value);
  }
  const keys = [...values.keys()].sort();
  if (keys.join(",") !== "description,name,type") {
    throw invalid("the frontmatter must have exactly name, description and type");
  }
  const [name, description, type] = [values.get("name"), values.get("description"), values.get("type")];
  if (typeof name !== "string" || typeof description !== "string" || typeof type !== "string") {
    throw invalid("name, description and type must be text");
  }
  return { name, description, type };
}

const isId = (id: unknown): id is string => typeof id === "string" && id.length <= MAX_ID_LENGTH && SLUG.test(id);

/** A memory and the file (in `.memory`) that holds it. */
export interface MemoryEntry {
  readonly record: MemoryRecord;
  readonly file: string;
}

/** The catalog and `MEMORY.md`: one line per memory, `- [name](file) - description`, in manifest order. */
export function catalogOf(entries: readonly MemoryEntry[]): string {
  return entries.map(({ record, file }) => `- [${record.name}](${file}) - ${record.description}\n`).join("");
}

/** What one commit did, for the lines that report it. `file` is relative to the workspace (`.memory/<name>-<id>.md`). */
export interface MemoryCommit {
  readonly saved: readonly {
    readonly name: string;
    readonly kind: MemoryType;
    readonly description: string;
    readonly file: string;
  }[];
  /** Replaced files removed after the commit. */
  readonly removed: readonly string[];
  /** Replaced files that could not be removed (unlisted, so never read again). */
  readonly removeFailed: readonly string[];
}

export interface ConsolidationPlan {
  /** The records the consolidation was decided on: each must still be in the store, unchanged. */
  readonly baseRecords: readonly MemoryRecord[];
  /** This run's extracted records, committed with the consolidation. */
  readonly additions: readonly MemoryRecord[];
  /** The names the replacements replace. */
  readonly sourceNames: readonly string[];
  readonly replacements: readonly MemoryRecord[];
}

export interface MemoryStoreOptions {
  readonly workspace: string;
  /** The id in each new file's name; default 32 hex from randomUUID(). A lowercase slug of at most 32 characters. */
  readonly idGenerator?: () => string;
  readonly maxIndexLines?: number;
  readonly maxIndexBytes?: number;
  /** How long one operation waits for another process's lock (ms). */
  readonly lockWaitMs?: number;
  /** Called once per operation that has waited more than a second for the lock. */
  readonly onLockWait?: () => void;
}

/** Operations on one `.memory` (by real path) in this process, one after another: the in-process half of the lock. */
const tails = new Map<string, Promise<void>>();

function serialized<T>(key: string, operation: () => Promise<T>): Promise<T> {
  const result = (tails.get(key) ?? Promise.resolve()).then(operation);
  const tail = result.then(
    () => undefined,
    () => undefined,
  );
  tails.set(key, tail);
  void tail.then(() => {
    if (tails.get(key) === tail) tails.delete(key);
  });
  return result;
}

/** What a transaction sees under the lock: the folder, the store as the manifest says, and the lock. */
interface Transaction {
  readonly folder: HeldFolder;
  readonly manifestExisted: boolean;
  readonly entries: readonly MemoryEntry[];
  readonly lock: HeldLock;
}

const EMPTY_COMMIT: MemoryCommit = Object.freeze({ saved: [], removed: [], removeFailed: [] });

/**
 * The only way into `.memory/`: the manifest is the set, `MEMORY.md` a view of it, each record a file of its own.
 * Every operation, reads included, runs after the previous one on the same folder in this process and under
 * proper-lockfile's lock across processes, and reads the manifest again under it.
 */
export class MemoryStore {
  readonly #workspace: string;
  readonly #nextId: () => string;
  readonly #maxIndexLines: number;
  readonly #maxIndexBytes: number;
  readonly #lockWaitMs: number;
  readonly #onLockWait: (() => void) | undefined;

  constructor(options: MemoryStoreOptions) {
    if (typeof options.workspace !== "string" || options.workspace === "") {
      throw new TypeError("workspace must be a non-empty path");
    }
    this.#workspace = options.workspace;
    this.#nextId = options.idGenerator ?? (() => randomUUID().replaceAll("-", ""));
    this.#maxIndexLines = positiveInteger("maxIndexLines", options.maxIndexLines ?? DEFAULT_MAX_INDEX_LINES);
    this.#maxIndexBytes = positiveInteger("maxIndexBytes", options.maxIndexBytes ?? DEFAULT_MAX_INDEX_BYTES);
    this.#lockWaitMs = positiveInteger("lockWaitMs", options.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS);
    this.#onLockWait = options.onLockWait;
  }

  async records(): Promise<readonly MemoryRecord[]> {
    return Object.freeze((await this.entries()).map((entry) => entry.record));
  }

  /** The records with their files, from one locked read. */
  async entries(): Promise<readonly MemoryEntry[]> {
    return this.#transaction(
      false,
      (tx) => Promise.resolve(tx.entries),
      () => Object.freeze([]),
    );
  }

  /** The catalog rendered from the manifest's set (never read from `MEMORY.md`). */
  async renderCatalog(): Promise<string> {
    return catalogOf(await this.entries());
  }

  async add(record: MemoryRecord): Promise<MemoryCommit> {
    return this.extend([record]);
  }

  /** Adds new memories only: a name already in the store, or twice in `records`, fails the whole call. */
  async extend(records: readonly MemoryRecord[]): Promise<MemoryCommit> {
    checkRecords(records, "records");
    // The caller's array may change while this waits its turn: the batch is what was passed.
    const batch = [...records];
    if (batch.length === 0) return EMPTY_COMMIT;
    return this.#transaction(true, async (tx) => {
      requireNewNames(
        tx.entries.map((entry) => entry.record.name),
        batch,
      );
      return this.#commit(tx, tx.entries, batch, []);
    });
  }

  /**
   * Replaces the records named in `sourceNames` by `replacements` and adds `additions`, in one commit. The store is
   * read again under the lock: records added meanwhile are kept, and a base record changed or removed meanwhile fails
   * it (`memory collection changed during consolidation`).
   */
  async applyConsolidation(given: ConsolidationPlan): Promise<MemoryCommit> {
    const plan = {
      baseRecords: [...given.baseRecords],
      additions: [...given.additions],
      sourceNames: [...given.sourceNames],
      replacements: [...given.replacements],
    };
    checkRecords(plan.baseRecords, "baseRecords");
    checkRecords(plan.additions, "additions");
    checkRecords(plan.replacements, "replacements");
    const candidates = new Set([...plan.baseRecords, ...plan.additions].map((record) => record.name));
    const sources = new Set(plan.sourceNames);
    if (sources.size !== plan.sourceNames.length || plan.sourceNames.some((name) => !candidates.has(name))) {
      throw new MemoryStoreError("consolidation source_names must be unique names of the candidates");
    }
    return this.#transaction(true, async (tx) => {
      const current = new Map(tx.entries.map((entry) => [entry.record.name, entry.record]));
      const unchanged = plan.baseRecords.every((record) => {
        const now = current.get(record.name);
        return now !== undefined && sameRecord(now, record);
      });
      if (!unchanged) throw new MemoryStoreError("memory collection changed during consolidation");
      // Only base records are replaced: a source naming one of this run's additions consumes that addition, and a
      // stored record of the same name (another process's, saved meanwhile) was never shown to the consolidator.
      const baseNames = new Set(plan.baseRecords.map((record) => record.name));
      const isReplaced = (entry: MemoryEntry): boolean =>
        sources.has(entry.record.name) && baseNames.has(entry.record.name);
      const kept = tx.entries.filter((entry) => !isReplaced(entry));
      const added = [...plan.additions.filter((record) => !sources.has(record.name)), ...plan.replacements];
      requireNewNames(
        kept.map((entry) => entry.record.name),
        added,
      );
      const replaced = tx.entries.filter(isReplaced);
      return this.#commit(tx, kept, added, replaced);
    });
  }

  /** The catalog of `entries`, within the index's bounds; past them the store refuses it, on read and on write. */
  #boundedCatalog(entries: readonly MemoryEntry[]): string {
    const catalog = catalogOf(entries);
    if (lineCount(catalog) > this.#maxIndexLines) {
      throw new MemoryStoreError(`memory index exceeds ${this.#maxIndexLines} lines`);
    }
    if (Buffer.byteLength(catalog, "utf8") > this.#maxIndexBytes) {
      throw new MemoryStoreError(`memory index exceeds ${this.#maxIndexBytes} UTF-8 bytes`);
    }
    return catalog;
  }

  /**
   * New files first (O_EXCL, synced, read back), then `MEMORY.md`, then the manifest: the commit point. Only after it
   * are replaced files removed. Any failure before the manifest is replaced puts the index back and removes the new
   * files, so the old set stays whole.
   */
  async #commit(
    tx: Transaction,
    kept: readonly MemoryEntry[],
    added: readonly MemoryRecord[],
    replaced: readonly MemoryEntry[],
  ): Promise<MemoryCommit> {
    const { folder } = tx;
    const fresh = added.map((record) => ({ record, file: `${record.name}-${this.#id()}.md` }));
    const final = [...kept, ...fresh];
    const catalog = this.#boundedCatalog(final);
    const created: string[] = [];
    let indexReplaced = false;
    try {
      for (const { record, file } of fresh) {
        const bytes = Buffer.from(serializeMemoryRecord(record), "utf8");
        try {
          await folder.createNew(file, bytes);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
          throw new MemoryStoreError(`memory file already exists: ${MEMORY_FOLDER}/${file}`, { cause: error });
        }
        created.push(file);
        const back = await folder.read(file, MAX_MEMORY_BYTES + 1);
        if (back === undefined || !back.equals(bytes)) {
          throw new MemoryStoreError(`memory file did not read back as written: ${MEMORY_FOLDER}/${file}`);
        }
      }
      await atomicReplace(folder, INDEX, catalog);
      indexReplaced = true;
      if (tx.lock.compromised()) throw new MemoryStoreError("memory lock was lost during the write");
      await atomicReplace(folder, MANIFEST, JSON.stringify({ version: 1, files: final.map((entry) => entry.file) }));
    } catch (error) {
      if (indexReplaced) await restoreIndex(tx);
      for (const file of created) await folder.remove(file);
      folder.sync();
      throw storeError(error);
    }
    const removed: string[] = [];
    const removeFailed: string[] = [];
    for (const { file } of replaced) {
      ((await folder.remove(file)) ? removed : removeFailed).push(`${MEMORY_FOLDER}/${file}`);
    }
    if (replaced.length > 0) folder.sync();
    return Object.freeze({
      saved: Object.freeze(
        fresh.map(({ record, file }) =>
          Object.freeze({
            name: record.name,
            kind: record.kind,
            description: record.description,
            file: `${MEMORY_FOLDER}/${file}`,
          }),
        ),
      ),
      removed: Object.freeze(removed),
      removeFailed: Object.freeze(removeFailed),
    });
  }

  #id(): string {
    let id: unknown;
    try {
      id = this.#nextId();
    } catch (error) {
      throw new MemoryStoreError("memory id could not be made", { cause: error });
    }
    if (!isId(id)) throw new MemoryStoreError("memory id must be a lowercase slug of at most 32 characters");
    return id;
  }

  /**
   * `work` on the store as it is now, in this process's queue for the folder and under its lock. Without a `.memory`
   * a read sees an empty store and makes nothing; a write (`create`) makes the folder first.
   */
  async #transaction<T>(create: boolean, work: (tx: Transaction) => Promise<T>, missing?: () => T): Promise<T> {
    let workspace: string;
    try {
      workspace = realpathSync.native(this.#workspace);
    } catch (error) {
      throw new MemoryStoreError("memory workspace is not a folder", { cause: error });
    }
    return serialized(join(workspace, MEMORY_FOLDER), async () => {
      try {
        return await this.#once(workspace, create, work, missing);
      } catch (error) {
        // The folder was removed after it was opened and before the lock was taken: another process's first commit
        // failed and removed the empty folder it had made while this one waited for its lock. Opened again, once.
        if (
          !(error instanceof MemoryLockError) ||
          (error.cause as NodeJS.ErrnoException | undefined)?.code !== "ENOENT"
        ) {
          throw error;
        }
        return this.#once(workspace, create, work, missing);
      }
    });
  }

  /** One opening of `.memory` and one locked transaction on it (see #transaction). */
  async #once<T>(
    workspace: string,
    create: boolean,
    work: (tx: Transaction) => Promise<T>,
    missing: (() => T) | undefined,
  ): Promise<T> {
    const folder = openMemoryFolder(workspace, create);
    if (folder === undefined) {
      if (missing === undefined) throw new MemoryStoreError("memory folder could not be made");
      return missing();
    }
    try {
      return await this.#locked(folder, async (lock) => {
        try {
          folder.confirm();
        } catch (error) {
          throw new MemoryStoreError(ESCAPES, { cause: error });
        }
        const { manifestExisted, entries } = await readStore(folder, this.#maxIndexLines);
        // A set no commit of ours could have made (a hand-made store) is unreadable, not a bigger catalog for
        // the selector: the catalog goes into a request every run.
        this.#boundedCatalog(entries);
        return work({ folder, manifestExisted, entries, lock });
      });
    } catch (error) {
      // `.memory` is made by the first commit: one that failed leaves no empty folder for the reader to wonder at.
      // Only the folder this call made, only when empty (the lock folder is gone by now).
      folder.removeMade();
      throw error;
    } finally {
      folder.close();
    }
  }

  async #locked<T>(folder: HeldFolder, work: (lock: HeldLock) => Promise<T>): Promise<T> {
    const options = {
      lockfilePath: folder.entry(LOCK),
      stale: LOCK_STALE_MS,
      update: LOCK_UPDATE_MS,
      retryMs: LOCK_RETRY_MS,
      maxWaitMs: this.#lockWaitMs,
      waitingAfterMs: LOCK_WAIT_NOTICE_MS,
      ...(this.#onLockWait === undefined ? {} : { onWaiting: this.#onLockWait }),
    };
    const state = { acquired: false };
    try {
      return await withFileLock(folder.path, options, (lock) => {
        state.acquired = true;
        return work(lock);
      });
    } catch (error) {
      if (state.acquired) throw error;
      if (error instanceof FileLockTimeoutError) throw new MemoryLockError(LOCKED, { cause: error });
      // A `.lock` that is a file or a link: never removed, never written through.
      const code = (error as NodeJS.ErrnoException).code ?? "";
      if (["ENOTDIR", "EEXIST", "ELOOP"].includes(code)) throw new MemoryLockError(LOCKED, { cause: error });
      // The folder was removed or moved since it was opened.
      if (code === "ENOENT") throw new MemoryLockError(ESCAPES, { cause: error });
      throw new MemoryLockError(storeError(error).message, { cause: error });
    }
  }
}

/** `.memory` in the workspace, a real folder directly in it; undefined when missing and not to be made. */
function openMemoryFolder(workspace: string, create: boolean): HeldFolder | undefined {
  let found: ReturnType<typeof openHeldFolder>;
  try {
    found = openHeldFolder(workspace, MEMORY_FOLDER, create);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ELOOP") throw new MemoryStoreError(ESCAPES, { cause: error });
    throw storeError(error);
  }
  if (found === "missing") return undefined;
  if (found === "link" || found === "outside") throw new MemoryStoreError(ESCAPES);
  if (found === "not-a-folder") throw new MemoryStoreError("memory folder is not a folder");
  return found;
}

/** Keeps a BOM in the text (`ignoreBOM`), so the readers below accept exactly one, as the Skills reader does. */
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The manifest and every record it lists, each read bounded and checked; one bad part fails the whole read. */
async function readStore(
  folder: HeldFolder,
  maxFiles: number,
): Promise<{ manifestExisted: boolean; entries: readonly MemoryEntry[] }> {
  const bytes = await readSafely(folder, MANIFEST, MAX_MANIFEST_BYTES + 1);
  if (bytes === undefined) return { manifestExisted: false, entries: [] };
  if (bytes.length > MAX_MANIFEST_BYTES) {
    throw new MemoryStoreError(`memory manifest exceeds ${MAX_MANIFEST_BYTES} bytes`);
  }
  const entries: MemoryEntry[] = [];
  const names = new Set<string>();
  for (const file of parseManifest(bytes, maxFiles)) {
    const content = await readSafely(folder, file, MAX_MEMORY_BYTES + 1);
    if (content === undefined) throw unsafeFile(file);
    if (content.length > MAX_MEMORY_BYTES) {
      throw new MemoryStoreError(
        `memory file is invalid: ${MEMORY_FOLDER}/${file}: memory file must not exceed ${MAX_MEMORY_BYTES} UTF-8 bytes`,
      );
    }
    let text: string;
    try {
      text = UTF8.decode(content);
    } catch {
      throw new MemoryStoreError(`memory file is invalid: ${MEMORY_FOLDER}/${file}: it is not UTF-8`);
    }
    const record = parseMemoryRecord(text, file);
    if (names.has(record.name)) throw new MemoryStoreError(`memory manifest lists two memories named ${record.name}`);
    names.add(record.name);
    entries.push(Object.freeze({ record, file }));
  }
  return { manifestExisted: true, entries: Object.freeze(entries) };
}

async function readSafely(folder: HeldFolder, file: string, limit: number): Promise<Buffer | undefined> {
  try {
    return await folder.read(file, limit);
  } catch (error) {
    throw unsafeFile(file, error);
  }
}

const unsafeFile = (file: string, cause?: unknown): MemoryStoreError =>
  new MemoryStoreError(`memory file cannot be read safely: ${MEMORY_FOLDER}/${file}`, { cause });

/** `{"version":1,"files":[…]}` exactly: safe, unique file names, at most `maxFiles` of them. */
function parseManifest(bytes: Buffer, maxFiles: number): readonly string[] {
  let value: unknown;
  try {
    value = JSON.parse(UTF8.decode(bytes).replace(/^\uFEFF/, ""));
  } catch {
    throw new MemoryStoreError("memory manifest is not valid UTF-8 JSON");
  }
  const manifest = value as { version?: unknown; files?: unknown };
  const valid =
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    Object.keys(value).sort().join(",") === "files,version" &&
    manifest.version === 1 &&
    Array.isArray(manifest.files) &&
    manifest.files.every((file) => typeof file === "string");
  if (!valid) throw new MemoryStoreError("memory manifest has an invalid schema");
  const files = manifest.files as string[];
  if (files.length > maxFiles) throw new MemoryStoreError(`memory manifest lists more than ${maxFiles} files`);
  for (const file of files) {
    const base = file.slice(0, -".md".length);
    if (file.length > MAX_FILE_NAME_LENGTH || !FILE_NAME.test(file) || isWindowsReservedComponent(base)) {
      throw new MemoryStoreError("memory manifest lists an unsafe file name");
    }
  }
  if (new Set(files).size !== files.length) throw new MemoryStoreError("memory manifest lists a file twice");
  return files;
}

/**
 * `name` replaced whole: the text goes to a new temporary file in `.memory` (O_EXCL, never through a link), synced,
 * then renamed over `name`. A reader sees the old bytes or the new ones, never a mix.
 */
async function atomicReplace(folder: HeldFolder, name: string, text: string): Promise<void> {
  const temp = `.${name}.${randomBytes(6).toString("hex")}.tmp`;
  await folder.createNew(temp, Buffer.from(text, "utf8"));
  try {
    await folder.rename(temp, name);
  } catch (error) {
    await folder.remove(temp);
    throw error;
  }
  folder.sync();
}

/** After a failed commit: `MEMORY.md` as the old set renders it, or gone when there was no set. Best effort. */
async function restoreIndex(tx: Transaction): Promise<void> {
  try {
    if (tx.manifestExisted) await atomicReplace(tx.folder, INDEX, catalogOf(tx.entries));
    else await tx.folder.remove(INDEX);
  } catch {
    // The manifest was not replaced, so the set is the old one; MEMORY.md is only a view and is rewritten next time.
  }
}

/** A failure as the store reports it: its own errors as they are, the system's in words that name no path. */
function storeError(error: unknown): MemoryStoreError {
  if (error instanceof MemoryStoreError) return error;
  const reason = (() => {
    switch ((error as NodeJS.ErrnoException).code) {
      case "ENOSPC":
      case "EDQUOT":
        return "the disk is full";
      case "EROFS":
        return "the disk is read-only";
      case "EACCES":
      case "EPERM":
        return "the memory folder is not writable";
      case "ELOOP":
        return ESCAPES;
      default:
        return "the memory could not be written";
    }
  })();
  return new MemoryStoreError(reason, { cause: error });
}

function checkRecords(records: readonly MemoryRecord[], what: string): void {
  if (!Array.isArray(records) || !records.every((record) => record instanceof MemoryRecord)) {
    throw new TypeError(`${what} must be an array of MemoryRecord`);
  }
}

/** Every name in `added` new to `existing` and to each other. */
function requireNewNames(existing: readonly string[], added: readonly MemoryRecord[]): void {
  const seen = new Set(existing);
  const repeated: string[] = [];
  for (const { name } of added) {
    if (seen.has(name)) repeated.push(name);
    seen.add(name);
  }
  if (repeated.length > 0) throw new MemoryStoreError(`memory names already exist: ${repeated.join(", ")}`);
}

const sameRecord = (a: MemoryRecord, b: MemoryRecord): boolean =>
  a.name === b.name && a.description === b.description && a.kind === b.kind && a.body === b.body;

function positiveInteger(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value <= 0) throw new RangeError(`${name} must be a positive integer`);
  return value;
}

/**
 * JSON with every object's keys sorted (by code unit) at every depth and no whitespace; non-ASCII stays as it is.
 * The same value always gives the same text. `undefined`, functions, symbols, bigints and non-finite numbers throw.
 */
export function stableJson(value: unknown): string {
  if (value === null || typeof value === "string" || typeof value === "boolean") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new TypeError("stableJson cannot write a non-finite number");
    return JSON.stringify(value);
  }
  // Array.from visits holes (as undefined, which throws); map would skip them and write "[1,,2]".
  if (Array.isArray(value)) return `[${Array.from(value as unknown[], (item) => stableJson(item)).join(",")}]`;
  if (typeof value === "object") {
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${stableJson(item)}`).join(",")}}`;
  }
  throw new TypeError(`stableJson cannot write a value of type ${typeof value}`);
}

/** Chooses memories for a query from the catalog; the reply text, to be parsed as a JSON array of names. */
export interface MemorySelector {
  select(query: string, catalog: string): Promise<string>;
}

/** Finds what is worth keeping in a finished run's history; the reply text, a JSON array of memories. */
export interface MemoryExtractor {
  extract(history: readonly ChatMessage[], catalog: string): Promise<string>;
}

/** Merges memories that repeat or contradict; the reply text, `{ source_names, records }`. */
export interface MemoryConsolidator {
  consolidate(records: readonly MemoryRecord[]): Promise<string>;
}

/** The history as chapter 8's transcript lines hold it: one wire-form object per message. */
function conversationOf(history: readonly ChatMessage[]): unknown[] {
  return history.map((message) => JSON.parse(serializeTranscript([message])) as unknown);
}

/** The extractor's user message. */
export function extractionPayload(history: readonly ChatMessage[], catalog: string): string {
  return stableJson({ conversation: conversationOf(history), existing_catalog: catalog });
}

/** UTF-8 bytes of `extractionPayload(history, catalog)`, counted one message at a time without making it. */
function extractionPayloadBytes(history: readonly ChatMessage[], catalog: string): number {
  let bytes = Buffer.byteLength(stableJson({ conversation: [], existing_catalog: catalog }), "utf8");
  history.forEach((message, index) => {
    bytes += Buffer.byteLength(stableJson(conversationOf([message])[0]), "utf8") + (index > 0 ? 1 : 0);
  });
  return bytes;
}

/**
 * The three side queries through the run's own model: one request each, no tools, the fixed prompt and the JSON
 * input. A reply is accepted only without tool calls, with finishReason exactly `stop`, with text that is not blank
 * and at most 1 MiB; its parsing is the session's.
 */
export class ModelMemoryQueries implements MemorySelector, MemoryExtractor, MemoryConsolidator {
  constructor(private readonly model: ModelClient) {}

  select(query: string, catalog: string): Promise<string> {
    return this.#ask(SELECTOR_SYSTEM_PROMPT, stableJson({ catalog, query }), "selector");
  }

  extract(history: readonly ChatMessage[], catalog: string): Promise<string> {
    return this.#ask(EXTRACTOR_SYSTEM_PROMPT, extractionPayload(history, catalog), "extractor");
  }

  consolidate(records: readonly MemoryRecord[]): Promise<string> {
    const input = records.map((record) => ({
      body: record.body,
      description: record.description,
      name: record.name,
      type: record.kind,
    }));
    return this.#ask(CONSOLIDATOR_SYSTEM_PROMPT, stableJson(input), "consolidator");
  }

  async #ask(prompt: string, input: string, purpose: RequestPurpose): Promise<string> {
    const reply = await this.model.complete(
      Object.freeze({
        messages: Object.freeze([systemMessage(prompt), userMessage(input)]),
        tools: Object.freeze([]),
        purpose,
      }),
    );
    if (reply.message.toolCalls.length > 0) throw new MemoryStoreError("memory model must not call tools");
    if (reply.finishReason !== "stop") {
      throw new MemoryStoreError(`memory model finishReason must be stop, got ${reply.finishReason}`);
    }
    const text = reply.message.content;
    if (typeof text !== "string" || text.trim() === "") throw new MemoryStoreError("memory model returned no text");
    if (Buffer.byteLength(text, "utf8") > MAX_SIDE_QUERY_REPLY_BYTES) {
      throw new MemoryStoreError(`memory model reply is larger than ${MAX_SIDE_QUERY_REPLY_BYTES} bytes`);
    }
    return text;
  }
}

/**
 * The deterministic fallback: records whose `name + " " + description` (never the body) hold the most of the query's
 * tokens (runs of ASCII letters and digits of at least 3, and each pair of adjacent Han characters), ties by name.
 */
export function keywordSelect(query: string, records: readonly MemoryRecord[], limit: number): readonly MemoryRecord[] {
  const lowered = query.toLowerCase();
  const tokens = new Set<string>();
  for (const [word] of lowered.matchAll(/[a-z0-9]+/g)) if (word.length >= MIN_KEYWORD_LENGTH) tokens.add(word);
  for (const [run] of lowered.matchAll(/\p{Script=Han}+/gu)) {
    const characters = Array.from(run);
    for (let at = 0; at + 1 < characters.length; at += 1) tokens.add(`${characters[at]}${characters[at + 1]}`);
  }
  return Object.freeze(
    records
      .map((record) => {
        const text = `${record.name} ${record.description}`.toLowerCase();
        return { record, score: [...tokens].filter((token) => text.includes(token)).length };
      })
      .filter(({ score }) => score > 0)
      .sort((a, b) => b.score - a.score || (a.record.name < b.record.name ? -1 : a.record.name > b.record.name ? 1 : 0))
      .slice(0, limit)
      .map(({ record }) => record),
  );
}

/**
 * What the session did, for the terminal's `[Memory]` lines (the CLI words them). Names are slugs; descriptions and
 * reasons are model or workspace text, to be escaped when printed.
 */
export type MemoryNotice =
  /** A side query is about to be sent (the CLI shows a status while it runs). */
  | { readonly type: "querying"; readonly query: "selector" | "extractor" | "consolidator" }
  /** The selector chose `names` (in its order) out of `total` memories. */
  | { readonly type: "selected"; readonly names: readonly string[]; readonly total: number }
  /** The selector failed for `reason`; the keyword fallback chose `names` out of `total`. */
  | {
      readonly type: "selection_failed";
      readonly reason: string;
      readonly names: readonly string[];
      readonly total: number;
    }
  /** The store could not be locked for this turn (`reason`): nothing was selected or injected. */
  | { readonly type: "unreadable"; readonly reason: string }
  /** The extractor's valid reply named `names` (none: nothing new to save). */
  | { readonly type: "extracted"; readonly names: readonly string[] }
  /** The extractor's input would be `bytes` UTF-8 bytes, over `limit`: no call was made, nothing was saved. */
  | { readonly type: "extraction_skipped"; readonly bytes: number; readonly limit: number }
  /** The extractor's call, reply or commit failed for `reason`: nothing was saved. */
  | { readonly type: "extraction_failed"; readonly reason: string }
  /** A consolidation was committed: `sources` were replaced by `records`. */
  | { readonly type: "consolidated"; readonly sources: readonly string[]; readonly records: readonly string[] }
  /** The consolidator's call, plan or commit failed for `reason`: nothing of this run was saved. */
  | { readonly type: "consolidation_failed"; readonly reason: string }
  /** A new record file was committed (`file` is `.memory/<name>-<id>.md`). */
  | {
      readonly type: "saved";
      readonly name: string;
      readonly kind: MemoryType;
      readonly description: string;
      readonly file: string;
    }
  /** A replaced file was removed after a consolidation. */
  | { readonly type: "removed"; readonly file: string }
  /** A replaced file could not be removed; it is no longer listed, so never read again. */
  | { readonly type: "remove_failed"; readonly file: string }
  /** An operation has waited more than a second for `.memory/.lock` (another process holds it). */
  | { readonly type: "waiting_for_lock" };

export interface MemorySessionOptions {
  readonly store: MemoryStore;
  readonly selector?: MemorySelector;
  readonly extractor?: MemoryExtractor;
  readonly consolidator?: MemoryConsolidator;
  /** Whether `beforeModel()` returns the memory message (chapter 10 renders `selected` itself); default true. */
  readonly emitContextMessages?: boolean;
  readonly consolidateThreshold?: number;
  readonly maxSelected?: number;
  readonly maxExtractionBytes?: number;
  readonly onNotice?: (notice: MemoryNotice) => void;
}

/**
 * Memory around one run: select before the first request, inject into each request, extract (and consolidate) from
 * the canonical history after the answer. A failure of memory never fails the run: it sets `lastError` and sends a
 * notice. The one exception is a store that cannot be read at `beginTurn`, which fails the run before any model call.
 */
export class MemorySession implements TurnLifecycle {
  readonly #store: MemoryStore;
  readonly #selector: MemorySelector | undefined;
  readonly #extractor: MemoryExtractor | undefined;
  readonly #consolidator: MemoryConsolidator | undefined;
  readonly #emit: boolean;
  readonly #threshold: number;
  readonly #maxSelected: number;
  readonly #maxExtractionBytes: number;
  readonly #onNotice: ((notice: MemoryNotice) => void) | undefined;
  #selected: readonly MemoryRecord[] = Object.freeze([]);
  /** The last failure of the current run, one of the three fixed strings; reset by `beginTurn`. */
  lastError: string | undefined;

  constructor(options: MemorySessionOptions) {
    this.#store = options.store;
    this.#selector = options.selector;
    this.#extractor = options.extractor;
    this.#consolidator = options.consolidator;
    this.#emit = options.emitContextMessages ?? true;
    this.#threshold = positiveInteger(
      "consolidateThreshold",
      options.consolidateThreshold ?? DEFAULT_CONSOLIDATE_THRESHOLD,
    );
    this.#maxSelected = positiveInteger("maxSelected", options.maxSelected ?? DEFAULT_MAX_SELECTED);
    this.#maxExtractionBytes = positiveInteger(
      "maxExtractionBytes",
      options.maxExtractionBytes ?? DEFAULT_MAX_EXTRACTION_BYTES,
    );
    this.#onNotice = options.onNotice;
  }

  /** The memories chosen for this run, in the selector's order. */
  get selected(): readonly MemoryRecord[] {
    return this.#selected;
  }

  async beginTurn(query: string): Promise<void> {
    this.lastError = undefined;
    this.#selected = Object.freeze([]);
    let entries: readonly MemoryEntry[];
    try {
      entries = await this.#store.entries();
    } catch (error) {
      if (error instanceof MemoryLockError) {
        this.#notify({ type: "unreadable", reason: error.message });
        return;
      }
      const message = error instanceof MemoryStoreError ? error.message : "memory store cannot be read";
      throw new MemoryUnreadableError(namingThePlace(message), { cause: error });
    }
    // Nothing to choose from: no selector call at all.
    if (entries.length === 0) return;
    const records = entries.map((entry) => entry.record);
    if (this.#selector === undefined) {
      // A session built without a selector chooses by keywords alone, which is no failure.
      this.#selected = keywordSelect(query, records, this.#maxSelected);
      this.#notify({ type: "selected", names: this.#selected.map((r) => r.name), total: records.length });
      return;
    }
    try {
      this.#notify({ type: "querying", query: "selector" });
      const text = await this.#selector.select(query, catalogOf(entries));
      this.#selected = Object.freeze(parseSelection(text, records).slice(0, this.#maxSelected));
      this.#notify({ type: "selected", names: this.#selected.map((r) => r.name), total: records.length });
    } catch (error) {
      this.#selected = keywordSelect(query, records, this.#maxSelected);
      this.lastError = SELECTION_FAILED;
      this.#notify({
        type: "selection_failed",
        reason: reasonOf(error),
        names: this.#selected.map((r) => r.name),
        total: records.length,
      });
    }
  }

  beforeModel(): readonly ChatMessage[] {
    if (!this.#emit || this.#selected.length === 0) return [];
    return [systemMessage(this.renderSelected())];
  }

  /** The selected memories as the memory message holds them; "" when none is selected. */
  renderSelected(): string {
    if (this.#selected.length === 0) return "";
    const blocks = this.#selected.map(
      (record) => `## ${record.name} (${record.kind})\n\n${record.description}\n\n${record.body}`,
    );
    return `<relevant_memories>\n\n${blocks.join("\n\n")}\n\n</relevant_memories>`;
  }

  async complete(history: readonly ChatMessage[]): Promise<void> {
    // Nothing to ask: not even the store is read.
    if (this.#extractor === undefined && this.#consolidator === undefined) return;
    let records: readonly MemoryRecord[];
    let additions: readonly MemoryRecord[] = [];
    try {
      const snapshot = snapshotOf(history);
      const entries = await this.#store.entries();
      records = entries.map((entry) => entry.record);
      if (this.#extractor !== undefined) {
        const catalog = catalogOf(entries);
        const bytes = extractionPayloadBytes(snapshot, catalog);
        if (bytes > this.#maxExtractionBytes) {
          this.lastError = EXTRACTION_FAILED;
          this.#notify({ type: "extraction_skipped", bytes, limit: this.#maxExtractionBytes });
          return;
        }
        this.#notify({ type: "querying", query: "extractor" });
        additions = parseExtraction(await this.#extractor.extract(snapshot, catalog), records);
        this.#notify({ type: "extracted", names: additions.map((record) => record.name) });
      }
    } catch (error) {
      this.lastError = EXTRACTION_FAILED;
      this.#notify({ type: "extraction_failed", reason: reasonOf(error) });
      return;
    }
    const candidates = [...records, ...additions];
    if (this.#consolidator !== undefined && candidates.length >= this.#threshold) {
      await this.#consolidate(records, additions, candidates, this.#consolidator);
      return;
    }
    if (additions.length === 0) return;
    try {
      this.#report(await this.#store.extend(additions));
    } catch (error) {
      this.lastError = EXTRACTION_FAILED;
      this.#notify({ type: "extraction_failed", reason: reasonOf(error) });
    }
  }

  async #consolidate(
    records: readonly MemoryRecord[],
    additions: readonly MemoryRecord[],
    candidates: readonly MemoryRecord[],
    consolidator: MemoryConsolidator,
  ): Promise<void> {
    try {
      this.#notify({ type: "querying", query: "consolidator" });
      const plan = parsePlan(await consolidator.consolidate(Object.freeze([...candidates])), candidates);
      const commit = await this.#store.applyConsolidation({
        baseRecords: records,
        additions,
        sourceNames: plan.sourceNames,
        replacements: plan.replacements,
      });
      this.#notify({
        type: "consolidated",
        sources: plan.sourceNames,
        records: plan.replacements.map((record) => record.name),
      });
      this.#report(commit);
    } catch (error) {
      this.lastError = CONSOLIDATION_FAILED;
      this.#notify({ type: "consolidation_failed", reason: reasonOf(error) });
    }
  }

  #report(commit: MemoryCommit): void {
    for (const saved of commit.saved) this.#notify({ type: "saved", ...saved });
    for (const file of commit.removed) this.#notify({ type: "removed", file });
    for (const file of commit.removeFailed) this.#notify({ type: "remove_failed", file });
  }

  #notify(notice: MemoryNotice): void {
    try {
      this.#onNotice?.(Object.freeze(notice));
    } catch {
      // A listener's failure is not memory's, and memory's never fails the run.
    }
  }
}

/**
 * A store error as one line that names what to fix, for the refusal the CLI prints: the manifest's and the folder's
 * messages get their path after them (a record's already names its file), the book's words left whole.
 */
function namingThePlace(message: string): string {
  // An index over its bounds is the manifest's set: it lists too many memories, or too long descriptions.
  if (message.startsWith("memory manifest") || message.startsWith("memory index")) {
    return `${message}: ${MEMORY_FOLDER}/${MANIFEST}`;
  }
  if (message === ESCAPES || message === "memory folder is not a folder") return `${message}: ${MEMORY_FOLDER}`;
  return message;
}

/** A copy of the history no later edit reaches and no extractor can change, checked for tool-call pairing. */
function snapshotOf(history: readonly ChatMessage[]): readonly ChatMessage[] {
  if (!Array.isArray(history) || !history.every((message) => isChatMessage(message))) {
    throw new MemoryStoreError("the history is not a list of messages");
  }
  const copy = history.map((message) => {
    const clone = structuredClone(message);
    if (clone.role === "assistant") {
      for (const call of clone.toolCalls) Object.freeze(call);
      Object.freeze(clone.toolCalls);
    }
    return Object.freeze(clone);
  });
  validateToolPairing(copy);
  return Object.freeze(copy);
}

function fail(error: Error): never {
  throw error;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new MemoryStoreError("memory model output is not valid JSON");
  }
}

function parseSelection(text: string, records: readonly MemoryRecord[]): MemoryRecord[] {
  const value = parseJson(text);
  if (
    !Array.isArray(value) ||
    !value.every((name) => typeof name === "string") ||
    new Set(value).size !== value.length
  ) {
    throw new MemoryStoreError("selector output is not a JSON array of unique names");
  }
  const byName = new Map(records.map((record) => [record.name, record]));
  return value.map((name) => {
    const record = byName.get(name);
    if (record === undefined) throw new MemoryStoreError("selector named an unknown memory");
    return record;
  });
}

const RECORD_KEYS = "body,description,name,type";

/** One `{ name, type, description, body }` item as a record; `undefined` when its shape is wrong. */
function recordFromJson(item: unknown): MemoryRecord | undefined {
  if (typeof item !== "object" || item === null || Array.isArray(item)) return undefined;
  if (Object.keys(item).sort().join(",") !== RECORD_KEYS) return undefined;
  const { name, type, description, body } = item as Record<string, unknown>;
  if ([name, type, description, body].some((field) => typeof field !== "string")) return undefined;
  return new MemoryRecord({
    name: name as string,
    description: description as string,
    kind: type as MemoryType,
    body: body as string,
  });
}

function parseExtraction(text: string, existing: readonly MemoryRecord[]): readonly MemoryRecord[] {
  const value = parseJson(text);
  const notMemories = (): MemoryStoreError => new MemoryStoreError("extractor output is not a JSON array of memories");
  if (!Array.isArray(value)) throw notMemories();
  // Counted before a single record is built: a reply of 10,000 items costs nothing.
  if (existing.length + value.length > DEFAULT_MAX_INDEX_LINES) {
    throw new MemoryStoreError(`extractor output would take the store past ${DEFAULT_MAX_INDEX_LINES} memories`);
  }
  const records: MemoryRecord[] = [];
  for (const item of value as unknown[]) records.push(recordFromJson(item) ?? fail(notMemories()));
  requireNewNames(
    existing.map((record) => record.name),
    records,
  );
  return Object.freeze(records);
}

function parsePlan(
  text: string,
  candidates: readonly MemoryRecord[],
): { sourceNames: readonly string[]; replacements: readonly MemoryRecord[] } {
  const value = parseJson(text);
  const invalid = (): MemoryStoreError => new MemoryStoreError("consolidation output has an invalid schema");
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw invalid();
  if (Object.keys(value).sort().join(",") !== "records,source_names") throw invalid();
  const { source_names: sources, records } = value as { source_names: unknown; records: unknown };
  if (!Array.isArray(sources) || sources.length === 0 || !sources.every((name) => typeof name === "string")) {
    throw invalid();
  }
  if (!Array.isArray(records) || records.length === 0 || records.length > DEFAULT_MAX_INDEX_LINES) throw invalid();
  const names = new Set(candidates.map((record) => record.name));
  if (new Set(sources).size !== sources.length || !sources.every((name: string) => names.has(name))) {
    throw new MemoryStoreError("consolidation source_names must be unique names of the candidates");
  }
  const replacements: MemoryRecord[] = [];
  for (const item of records as unknown[]) replacements.push(recordFromJson(item) ?? fail(invalid()));
  const sourceSet = new Set<string>(sources);
  requireNewNames(
    candidates.filter((record) => !sourceSet.has(record.name)).map((record) => record.name),
    replacements,
  );
  return { sourceNames: Object.freeze([...sources]), replacements: Object.freeze(replacements) };
}

/** Why a step failed, as one line for the notice: memory's own messages as they are, anything else by its kind. */
function reasonOf(error: unknown): string {
  try {
    if (error instanceof MemoryStoreError) return error.message;
    if (error instanceof Error && error.name === "MessageContractError") {
      return "the history's tool calls are not paired";
    }
    if (error instanceof Error && error.name !== "Error") return `${error.name}: ${error.message}`;
    return error instanceof Error ? error.message : String(error);
  } catch {
    return "an unreadable failure";
  }
}
