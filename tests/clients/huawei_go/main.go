// The driver's core flow on the Huawei BMS/BSS emulator, run with a client metalfleet did not write: the official
// Go SDK (huaweicloud-sdk-go-v3). It lists flavors, creates the yearly/monthly server with the body the driver
// sends, follows its BSS order and BMS job until it runs, reads it (decoding the server details), lists it by
// name, tags it, reads its term from BSS, unsubscribes it and sees it gone; then it sends requests the reference
// table says are refused (a pay-per-use create, a one-year-too-long period, a bad signature, an unsubscription
// of a deleted server) and reports how each was answered. One JSON object per step on stdout.
//
// Usage: huawei_go '<job JSON>' (or the JSON on stdin), the job being
//
//	{"endpoint": "http://127.0.0.1:PORT", "ak": "...", "sk": "...", "project_id": "...", "domain_id": "...",
//	 "create": {"server": {...}}, "tags": [{"key": "...", "value": "..."}], "timeout_s": 60}
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth/basic"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth/global"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/config"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/sdkerr"
	bms "github.com/huaweicloud/huaweicloud-sdk-go-v3/services/bms/v1"
	bmsmodel "github.com/huaweicloud/huaweicloud-sdk-go-v3/services/bms/v1/model"
	bss "github.com/huaweicloud/huaweicloud-sdk-go-v3/services/bss/v2"
	bssmodel "github.com/huaweicloud/huaweicloud-sdk-go-v3/services/bss/v2/model"
)

type job struct {
	Endpoint  string            `json:"endpoint"`
	AK        string            `json:"ak"`
	SK        string            `json:"sk"`
	ProjectID string            `json:"project_id"`
	DomainID  string            `json:"domain_id"`
	Create    json.RawMessage   `json:"create"`
	Tags      []json.RawMessage `json:"tags"`
	TimeoutS  float64           `json:"timeout_s"`
}

// emit prints one step's result: {"step": name, "ok": ..., fields..., "error": {...}}.
func emit(step string, ok bool, fields map[string]any, err error) {
	out := map[string]any{"step": step, "ok": ok}
	for k, v := range fields {
		out[k] = v
	}
	if err != nil {
		out["error"] = describe(err)
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}

// describe is an SDK error as the service answered it (HTTP status, error code and message, request id).
func describe(err error) map[string]any {
	var svc *sdkerr.ServiceResponseError
	if errors.As(err, &svc) {
		return map[string]any{"status": svc.StatusCode, "code": svc.ErrorCode, "message": svc.ErrorMessage,
			"request_id": svc.RequestId}
	}
	return map[string]any{"message": err.Error()}
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func httpConfig() *config.HttpConfig {
	return config.DefaultHttpConfig().WithRetries(0).WithTimeout(20 * time.Second)
}

func bmsClient(j job, sk string) (*bms.BmsClient, error) {
	cred, err := basic.NewCredentialsBuilder().WithAk(j.AK).WithSk(sk).WithProjectId(j.ProjectID).SafeBuild()
	if err != nil {
		return nil, err
	}
	hc, err := bms.BmsClientBuilder().WithEndpoints([]string{j.Endpoint}).WithCredential(cred).
		WithHttpConfig(httpConfig()).SafeBuild()
	if err != nil {
		return nil, err
	}
	return bms.NewBmsClient(hc), nil
}

func bssClient(j job) (*bss.BssClient, error) {
	cred, err := global.NewCredentialsBuilder().WithAk(j.AK).WithSk(j.SK).WithDomainId(j.DomainID).SafeBuild()
	if err != nil {
		return nil, err
	}
	hc, err := bss.BssClientBuilder().WithEndpoints([]string{j.Endpoint}).WithCredential(cred).
		WithHttpConfig(httpConfig()).SafeBuild()
	if err != nil {
		return nil, err
	}
	return bss.NewBssClient(hc), nil
}

// poll calls check every 100ms until it says done or the deadline passes.
func poll(deadline time.Time, check func() (bool, error)) error {
	for {
		done, err := check()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func createBody(raw json.RawMessage, edit func(map[string]any)) (*bmsmodel.CreateBaremetalServersBody, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if edit != nil {
		edit(doc["server"].(map[string]any))
	}
	again, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var body bmsmodel.CreateBaremetalServersBody
	if err := json.Unmarshal(again, &body); err != nil {
		return nil, err
	}
	return &body, nil
}

func run(j job) error {
	deadline := time.Now().Add(time.Duration(j.TimeoutS * float64(time.Second)))
	client, err := bmsClient(j, j.SK)
	if err != nil {
		return err
	}
	billing, err := bssClient(j)
	if err != nil {
		return err
	}

	flavors, err := client.ListBaremetalFlavorDetailExtends(&bmsmodel.ListBaremetalFlavorDetailExtendsRequest{})
	ids := []string{}
	if err == nil && flavors.Flavors != nil {
		for _, f := range *flavors.Flavors {
			ids = append(ids, f.Id)
		}
	}
	emit("flavors", err == nil && len(ids) > 0, map[string]any{"flavors": ids}, err)
	if err != nil {
		return err
	}

	body, err := createBody(j.Create, nil)
	if err != nil {
		return err
	}
	created, err := client.CreateBareMetalServers(&bmsmodel.CreateBareMetalServersRequest{Body: body})
	if err != nil {
		emit("create", false, nil, err)
		return err
	}
	orderID, jobID := str(created.OrderId), str(created.JobId)
	emit("create", orderID != "" && jobID != "", map[string]any{"order_id": orderID, "job_id": jobID}, nil)

	var status int32
	err = poll(deadline, func() (bool, error) {
		order, err := billing.ShowCustomerOrderDetails(&bssmodel.ShowCustomerOrderDetailsRequest{OrderId: orderID})
		if err != nil {
			return false, err
		}
		if order.OrderInfo != nil && order.OrderInfo.Status != nil {
			status = *order.OrderInfo.Status
		}
		return status == 5, nil
	})
	emit("order", err == nil, map[string]any{"status": status}, err)
	if err != nil {
		return err
	}

	serverID, jobStatus := "", ""
	err = poll(deadline, func() (bool, error) {
		info, err := client.ShowJobInfos(&bmsmodel.ShowJobInfosRequest{JobId: jobID})
		if err != nil {
			return false, err
		}
		if info.Status != nil {
			jobStatus = info.Status.Value()
		}
		if info.Entities != nil && info.Entities.SubJobs != nil {
			for _, sub := range *info.Entities.SubJobs {
				if sub.Entities != nil && sub.Entities.ServerId != nil {
					serverID = *sub.Entities.ServerId
				}
			}
		}
		return jobStatus == "SUCCESS" && serverID != "", nil
	})
	emit("job", err == nil, map[string]any{"status": jobStatus, "server_id": serverID}, err)
	if err != nil {
		return err
	}

	shown, err := client.ListBareMetalServerDetails(&bmsmodel.ListBareMetalServerDetailsRequest{ServerId: serverID})
	if err != nil {
		emit("show", false, nil, err)
		return err
	}
	server := shown.Server
	deleteOnTermination := []string{}
	if server.OsExtendedVolumesvolumesAttached != nil {
		for _, v := range *server.OsExtendedVolumesvolumesAttached {
			deleteOnTermination = append(deleteOnTermination, str(v.DeleteOnTermination))
		}
	}
	charging := ""
	if server.Metadata != nil && server.Metadata.ChargingMode != nil {
		charging = server.Metadata.ChargingMode.Value()
	}
	tags := []string{}
	if server.Tags != nil {
		tags = *server.Tags
	}
	emit("show", server.Status.Value() == "ACTIVE", map[string]any{
		"status": server.Status.Value(), "name": server.Name, "charging_mode": charging,
		"order_id": str(server.Metadata.MeteringOrderId), "delete_on_termination": deleteOnTermination,
		"tags": tags}, nil)

	limit, offset := int32(100), int32(1)
	listed, err := client.ListBareMetalServers(&bmsmodel.ListBareMetalServersRequest{
		Name: &server.Name, Limit: &limit, Offset: &offset})
	names := []string{}
	if err == nil && listed.Servers != nil {
		for _, s := range *listed.Servers {
			names = append(names, s.Name)
		}
	}
	emit("list", err == nil, map[string]any{"names": names}, err)

	tagList := []bmsmodel.BaremetalServerTag{}
	for _, raw := range j.Tags {
		var tag bmsmodel.BaremetalServerTag
		if err := json.Unmarshal(raw, &tag); err != nil {
			return err
		}
		tagList = append(tagList, tag)
	}
	action := bmsmodel.GetBatchCreateBaremetalServerTagsRequestBodyActionEnum().CREATE
	_, err = client.BatchCreateBaremetalServerTags(&bmsmodel.BatchCreateBaremetalServerTagsRequest{
		ServerId: serverID, Body: &bmsmodel.BatchCreateBaremetalServerTagsRequestBody{Action: action, Tags: tagList}})
	tagged := []string{}
	if err == nil {
		again, err2 := client.ListBareMetalServerDetails(&bmsmodel.ListBareMetalServerDetailsRequest{ServerId: serverID})
		err = err2
		if err == nil && again.Server.Tags != nil {
			tagged = *again.Server.Tags
		}
	}
	emit("tag", err == nil, map[string]any{"tags": tagged}, err)

	main := int32(1)
	resources, err := billing.ListPayPerUseCustomerResources(&bssmodel.ListPayPerUseCustomerResourcesRequest{
		Body: &bssmodel.QueryResourcesReq{ResourceIds: &[]string{serverID}, OnlyMainResource: &main}})
	expires := []string{}
	if err == nil && resources.Data != nil {
		for _, r := range *resources.Data {
			expires = append(expires, str(r.ExpireTime))
		}
	}
	emit("term", err == nil && len(expires) == 1, map[string]any{"expire_times": expires}, err)

	cancelled, err := billing.CancelResourcesSubscription(&bssmodel.CancelResourcesSubscriptionRequest{
		Body: &bssmodel.UnsubscribeResourcesReq{ResourceIds: []string{serverID}, UnsubscribeType: 1}})
	orders := []string{}
	if err == nil && cancelled.OrderIds != nil {
		orders = *cancelled.OrderIds
	}
	emit("unsubscribe", err == nil && len(orders) == 1, map[string]any{"order_ids": orders}, err)
	if err != nil {
		return err
	}

	final := ""
	err = poll(deadline, func() (bool, error) {
		gone, err := client.ListBareMetalServerDetails(&bmsmodel.ListBareMetalServerDetailsRequest{ServerId: serverID})
		if err != nil {
			return false, err
		}
		final = gone.Server.Status.Value()
		return final == "DELETED", nil
	})
	emit("gone", err == nil, map[string]any{"status": final}, err)

	// What the reference says is refused, refused the same way.
	refused := func(step string, call func() error) {
		err := call()
		emit(step, err != nil, nil, err)
	}
	refused("refused_postpaid", func() error {
		body, err := createBody(j.Create, func(s map[string]any) {
			s["name"] = s["name"].(string) + "-postpaid"
			s["extendparam"] = map[string]any{"chargingMode": "postPaid"}
		})
		if err != nil {
			return err
		}
		_, err = client.CreateBareMetalServers(&bmsmodel.CreateBareMetalServersRequest{Body: body})
		return err
	})
	refused("refused_period", func() error {
		body, err := createBody(j.Create, func(s map[string]any) {
			s["name"] = s["name"].(string) + "-3y"
			extend := s["extendparam"].(map[string]any)
			extend["periodType"], extend["periodNum"] = "year", 3
		})
		if err != nil {
			return err
		}
		_, err = client.CreateBareMetalServers(&bmsmodel.CreateBareMetalServersRequest{Body: body})
		return err
	})
	refused("refused_signature", func() error {
		wrong, err := bmsClient(j, j.SK+"-wrong")
		if err != nil {
			return err
		}
		_, err = wrong.ListBaremetalFlavorDetailExtends(&bmsmodel.ListBaremetalFlavorDetailExtendsRequest{})
		return err
	})
	refused("refused_unsubscribe_gone", func() error {
		_, err := billing.CancelResourcesSubscription(&bssmodel.CancelResourcesSubscriptionRequest{
			Body: &bssmodel.UnsubscribeResourcesReq{ResourceIds: []string{serverID}, UnsubscribeType: 1}})
		return err
	})
	return nil
}

func main() {
	var raw []byte
	var err error
	if len(os.Args) > 1 {
		raw = []byte(os.Args[1])
	} else {
		raw, err = io.ReadAll(os.Stdin)
	}
	var j job
	if err == nil {
		err = json.Unmarshal(raw, &j)
	}
	if err == nil {
		if j.TimeoutS == 0 {
			j.TimeoutS = 60
		}
		err = run(j)
	}
	if err != nil {
		emit("done", false, nil, err)
		os.Exit(1)
	}
	emit("done", true, nil, nil)
}
