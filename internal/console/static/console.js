// Petrel console: live updates over one event stream, and the buttons
// that call the JSON API with the page's CSRF token. No inline script:
// the Content-Security-Policy allows only this file.
(function () {
  'use strict';

  var meta = document.querySelector('meta[name="csrf-token"]');
  var csrf = meta ? meta.getAttribute('content') : '';
  var conn = document.getElementById('conn');

  function setConn(text) {
    if (conn) { conn.textContent = 'live: ' + text; }
  }

  // The live part of the page is redrawn by the server; each event's data
  // is its new HTML, escaped by the server's templates.
  var live = document.getElementById('live');
  if (live && live.dataset.events && window.EventSource) {
    var es = new EventSource(live.dataset.events);
    es.onopen = function () { setConn('on'); };
    es.onerror = function () {
      setConn(es.readyState === EventSource.CLOSED ? 'off (reload the page)' : 'reconnecting');
    };
    es.onmessage = function (e) {
      live.innerHTML = e.data;
      live.dataset.updated = String(Date.now());
    };
  } else {
    setConn('off');
  }

  function say(text, failed) {
    var out = document.getElementById('result');
    if (!out) { return; }
    out.textContent = text;
    out.className = 'result ' + (failed ? 'failed' : 'ok');
  }

  // post sends body as JSON with the CSRF token and resolves to the
  // answer, or rejects with the API's error.
  function post(url, body) {
    return fetch(url, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf },
      body: JSON.stringify(body || {})
    }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (j) {
        if (!r.ok) { throw new Error(j.error || r.statusText); }
        return j;
      });
    });
  }

  // refreshMessages draws the list of messages again from the page.
  function refreshMessages() {
    return fetch(location.href, { credentials: 'same-origin' }).then(function (r) {
      return r.text();
    }).then(function (html) {
      var doc = new DOMParser().parseFromString(html, 'text/html');
      var fresh = doc.getElementById('messages');
      var old = document.getElementById('messages');
      if (fresh && old) { old.replaceWith(fresh); }
    });
  }

  var actions = {
    send: function (form) {
      var body = { to: form.elements.to.value, text: form.elements.text.value };
      var p = parseInt(form.elements.priority.value, 10);
      if (!isNaN(p)) { body.priority = p; }
      return post('/api/send', body).then(function (j) {
        return 'Sent message ' + j.id + ' to ' + j.destination + '.';
      });
    },
    purge: function (form) {
      return post(form.dataset.url, {}).then(function (j) {
        form.closest('details').open = false;
        return 'Purged ' + j.count + ' messages of ' + j.queue + '.';
      });
    },
    replay: function (form, submitter) {
      var body = {};
      if (submitter && submitter.name === 'one') {
        body.select = [ref(submitter.value)];
      } else if (submitter && submitter.value === 'selected') {
        body.select = Array.prototype.map.call(
          form.querySelectorAll('input[name="select"]:checked'),
          function (c) { return ref(c.value); });
        if (body.select.length === 0) {
          return Promise.reject(new Error('select messages to replay first'));
        }
      }
      return post(form.dataset.url, body).then(function (j) {
        return 'Replayed ' + j.count + ' messages.';
      });
    }
  };

  // ref reads "origin/id" into a message reference; the id stays a
  // string, since a number would lose its low bits.
  function ref(key) {
    var i = key.lastIndexOf('/');
    return { origin: key.slice(0, i), id: key.slice(i + 1) };
  }

  document.addEventListener('submit', function (ev) {
    var form = ev.target;
    var act = actions[form.dataset.action];
    if (!act) { return; }
    ev.preventDefault();
    say('Working…', false);
    act(form, ev.submitter).then(function (text) {
      say(text, false);
      return refreshMessages();
    }).catch(function (err) {
      say('Refused: ' + err.message, true);
    });
  });
})();
