// Notes, on Folio's JavaScript SDK. The whole app:
// - Connect: find the server from the entity, find its note type (the owner
//   adds it once: `folio type add --user NAME examples/notes/note-type.json`),
//   register with a key kept in this browser (IndexedDB, not extractable),
//   and go to the server's consent page.
// - Back from it: keep the authorization, list the notes, then follow them
//   live (another tab's or app's changes arrive as they happen).
// - Add (with an image), edit and delete notes; images are shown through
//   bearer URLs, which an <img> can load without headers.
import { AppKey, Folio, FolioError, authorizationFrom, filter, newRecordId, register, versionLink } from "folio-client";

const STATE_KEY = "folio-notes";
const $ = (id) => document.getElementById(id);

/** `{entity, appId, authorizationId}` between visits (and across the consent redirect). */
const state = {
  load: () => JSON.parse(localStorage.getItem(STATE_KEY) ?? "null"),
  save: (value) => localStorage.setItem(STATE_KEY, JSON.stringify(value)),
  clear: () => localStorage.removeItem(STATE_KEY),
};

function status(text) {
  $("status").textContent = text;
}

function fail(error) {
  const message = error instanceof FolioError ? `${error.message} (${error.code})` : String(error.message ?? error);
  $("error").textContent = message;
  $("error").hidden = false;
  status("");
}

/** The key this browser keeps for an entity's store. */
const keyFor = (entity) => AppKey.inBrowser(`notes:${entity}`);

/** The store's note type: the newest Type record named `note`. */
async function noteTypeOf(folio) {
  const typeType = await folio.records.builtinType("type");
  for await (const record of folio.records.list({ filter: filter.type(typeType), pageSize: 200 })) {
    if (record.content?.name === "note") return versionLink(record);
  }
  throw new Error(
    `${folio.entity} has no note type yet. Its owner adds it once: folio type add --user NAME examples/notes/note-type.json`,
  );
}

async function connect(entity) {
  status(`Finding ${entity}…`);
  const folio = await Folio.connect({ entity });
  const noteType = await noteTypeOf(folio);
  status("Registering…");
  const registered = await register({
    entity,
    key: await keyFor(entity),
    name: "Notes",
    description: "Keeps your notes, each with an optional image.",
    website: location.origin,
    redirect: `${location.origin}${location.pathname}{?authorization_id}`,
    scope: { read: [noteType], write: [noteType], subscribe: [noteType] },
  });
  state.save({ entity, appId: registered.appId, authorizationId: null });
  location.assign(registered.consentUrl);
}

/** The notes on screen, by record id; the connection and the note type. */
const notes = new Map();
let folio;
let noteType;

function render() {
  const list = $("list");
  list.replaceChildren();
  const sorted = [...notes.values()].sort((a, b) => b.received_at.localeCompare(a.received_at));
  for (const record of sorted) list.append(noteItem(record));
  if (sorted.length === 0) {
    const empty = document.createElement("li");
    empty.textContent = "No notes yet.";
    list.append(empty);
  }
}

function noteItem(record) {
  const item = $("note-template").content.firstElementChild.cloneNode(true);
  item.dataset.id = record.id;
  item.querySelector(".note-title").textContent = record.content.title;
  item.querySelector(".note-text").textContent = record.content.text ?? "";
  const image = record.content.image;
  if (image) {
    const img = item.querySelector(".note-image");
    img.alt = image.name;
    folio.blobs.bearerUrl(record, image).then((url) => {
      img.src = url.href;
      img.hidden = false;
    }, fail);
  }
  item.querySelector(".edit").addEventListener("click", () => edit(item, record));
  item.querySelector(".delete").addEventListener("click", async () => {
    try {
      await folio.records.delete(record);
      notes.delete(record.id);
      render();
    } catch (error) {
      fail(error);
    }
  });
  return item;
}

/** Turns a note into a form; saving writes a new version of the record as it was read. */
function edit(item, record) {
  const form = document.createElement("form");
  form.className = "edit-note";
  const title = Object.assign(document.createElement("input"), { name: "title", value: record.content.title, required: true });
  title.setAttribute("aria-label", "Title");
  const text = Object.assign(document.createElement("textarea"), { name: "text", value: record.content.text ?? "" });
  text.setAttribute("aria-label", "Text");
  const save = Object.assign(document.createElement("button"), { type: "submit", textContent: "Save" });
  form.append(title, text, save);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const content = { ...record.content, title: title.value, text: text.value };
      const updated = await folio.records.update(record, { content });
      notes.set(updated.id, updated);
      render();
    } catch (error) {
      fail(error);
    }
  });
  item.replaceChildren(form);
  title.focus();
}

async function addNote(event) {
  event.preventDefault();
  const form = event.target;
  try {
    const content = { title: form.title.value };
    if (form.text.value) content.text = form.text.value;
    const file = form.image.files[0];
    if (file) {
      status(`Uploading ${file.name}…`);
      content.image = await folio.blobs.upload(file, { type: file.type, name: file.name });
    }
    const record = await folio.records.create({ type: noteType, content });
    notes.set(record.id, record);
    form.reset();
    status("");
    render();
  } catch (error) {
    fail(error);
  }
}

async function start({ entity, appId, authorizationId }) {
  status(`Opening your notes on ${entity}…`);
  // Each tab its own client id: its own writes are not sent back to it,
  // the other tabs' are.
  folio = await Folio.connect({ entity, app: { appId, authorizationId, key: await keyFor(entity) }, clientId: newRecordId() });
  noteType = await noteTypeOf(folio);
  $("who").textContent = entity;
  $("who").hidden = false;
  for await (const record of folio.records.list({ filter: filter.type(noteType) })) notes.set(record.id, record);
  render();
  $("notes").hidden = false;
  status("");
  const live = folio.events.subscribe({ filter: filter.type(noteType), includeDeleted: true, onError: () => status("Reconnecting…"), onOpen: () => status("") });
  for await (const record of live) {
    if (record.no_content) notes.delete(record.id);
    else notes.set(record.id, record);
    render();
  }
}

async function main() {
  $("connect").addEventListener("submit", (event) => {
    event.preventDefault();
    connect($("entity").value.trim()).catch(fail);
  });
  $("new-note").addEventListener("submit", addNote);
  $("disconnect").addEventListener("click", () => {
    state.clear();
    location.replace(location.pathname);
  });

  const saved = state.load();
  const params = new URLSearchParams(location.search);
  if (saved && (params.has("authorization_id") || params.has("error"))) {
    const returned = location.href;
    history.replaceState(null, "", location.pathname);
    try {
      saved.authorizationId = authorizationFrom(returned);
      state.save(saved);
    } catch (error) {
      state.clear();
      $("connect").hidden = false;
      if (error instanceof FolioError && error.code === "access_denied") {
        fail(new Error("Access denied: Notes was not allowed to keep your notes."));
        return;
      }
      throw error;
    }
  }
  if (saved?.authorizationId) {
    await start(saved);
  } else {
    $("connect").hidden = false;
  }
}

main().catch(fail);
