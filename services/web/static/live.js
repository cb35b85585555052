// The board live: each change the server reports (server-sent events from WatchBoard) replaces the board's live part
// with the server's own rendering of it. The page reads fully without this script.
(function () {
  "use strict";
  var box = document.getElementById("live-board");
  var state = document.getElementById("live-state");
  if (!box || !box.dataset.live || !window.EventSource) return;
  var source = new EventSource(box.dataset.live);
  function say(text) {
    state.hidden = false;
    state.textContent = text;
  }
  source.addEventListener("board", function (event) {
    // Rendered and escaped on the server by the same template as the page; parsed as a document, never run.
    var parsed = new DOMParser().parseFromString(event.data, "text/html");
    box.replaceChildren.apply(box, Array.prototype.slice.call(parsed.body.childNodes));
    box.dataset.position = event.lastEventId;
    say("live");
  });
  source.addEventListener("open", function () { say("live"); });
  source.addEventListener("error", function () { say("reconnecting…"); });
})();
